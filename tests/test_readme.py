"""The README's second command is what CI runs, verbatim."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert len(commands) >= 2
    test_command = commands[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()
    assert "pytest" in test_command
