"""The README's service example prints its two documented lines and nothing else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, child_env


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (first, *_) = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    return str(first)


def test_the_readme_example_prints_exactly_its_two_lines_and_nothing_on_stderr(
    tmp_path: Path,
) -> None:
    code = readme_example()
    documented = re.findall(r"print\(.*\)  # (.*)", code)
    assert documented == ["completed Charged ann 5.00.", "completed 3"]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == documented
    assert done.stderr == ""
