"""docs/cli.md's ``console`` session runs as written: each command's exit code and output.

In a ``console`` block, ``$ `` starts a command (``# exit N`` after it: the exit code, else 0);
the lines under it must appear in its stdout in that order, ``...`` standing for any text.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.cli.invoke import child
from tests.conftest import ROOT, child_env

DOC = ROOT / "docs" / "cli.md"


@dataclass
class Step:
    command: str
    exit: int
    expected: list[str] = field(default_factory=list)


def session(text: str) -> list[Step]:
    steps: list[Step] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                command, _, comment = line[2:].partition("  # exit ")
                steps.append(Step(command, int(comment) if comment else 0))
            elif line.strip() and line != "...":
                steps[-1].expected.append(line)
    return steps


def shows(expected: list[str], actual: list[str]) -> bool:
    """Every expected line matches an actual line, in order (``...`` matches any text)."""
    lines = iter(actual)
    for want in expected:
        pattern = ".*".join(re.escape(part) for part in want.split("..."))
        if not any(re.fullmatch(pattern, line.rstrip()) for line in lines):
            return False
    return True


def test_the_session_in_docs_cli_md_runs_as_written(tmp_path: Path) -> None:
    steps = session(DOC.read_text(encoding="utf-8"))
    assert len(steps) >= 8
    python = f"{sys.executable} -m runtime"
    for step in steps:
        # `; exit $?` keeps bash as the parent, so a killed command reads 137 as in a terminal.
        command = step.command.replace("python -m runtime", python) + "; exit $?"
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == step.exit, (step.command, done.stdout, done.stderr)
        assert shows(step.expected, done.stdout.splitlines()), (step, done.stdout)


def test_the_matcher_refuses_output_the_doc_does_not_show() -> None:
    assert shows(["run r: ...", "b"], ["run r: halted", "a", "b"])
    assert not shows(["b", "run r: ..."], ["run r: halted", "a", "b"])
    assert not shows(["run r: halted"], ["run r: completed"])


def test_the_agent_module_in_docs_cli_md_drives_a_run_by_each_name(tmp_path: Path) -> None:
    (module,) = re.findall(r"```python\n(# myagents\.py.*?)```", DOC.read_text("utf-8"), re.DOTALL)
    (tmp_path / "myagents.py").write_text(module, encoding="utf-8")
    for name in ("agent", "build", "connected"):
        done = child("run", "--agent", f"myagents:{name}", "--run-id", name, "hi", cwd=tmp_path)
        assert (done.code, done.out) == (0, "hello\n"), done.err


def test_the_intro_of_docs_cli_md_names_every_command() -> None:
    from runtime.cli.app import COMMANDS

    intro = DOC.read_text("utf-8").split("\n\n")[1]
    assert [c.name for c in COMMANDS if f"`{c.name}`" not in intro] == []
