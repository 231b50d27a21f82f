"""Running the CLI in this process (``main(argv)``) and as ``python -m runtime`` in a child."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import child_env


@dataclass(frozen=True)
class Done:
    """A finished CLI invocation."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines on stderr (what a non-terminal stderr gets)."""
        return [json.loads(line) for line in self.err.splitlines() if line.startswith("{")]

    def event(self, name: str) -> dict[str, Any]:
        (found,) = [e for e in self.events() if e["event"] == name]
        return found

    @property
    def error_line(self) -> str:
        return self.err.rstrip("\n").splitlines()[-1]


Cli = Callable[..., Done]
"""The ``cli`` fixture: ``cli(*argv)`` runs main(argv) in this process."""


def child(*argv: str, cwd: Path | None = None, stdin: str | None = None, **env: str) -> Done:
    """``python -m runtime ARGV`` in a fresh process importing this checkout."""
    environ = child_env(**env)
    if "BIDE_DB" not in env:
        environ.pop("BIDE_DB", None)
    done = subprocess.run(
        [sys.executable, "-m", "runtime", *argv],
        env=environ,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)
