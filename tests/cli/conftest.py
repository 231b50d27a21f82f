"""The ``cli`` fixture: main(argv) in this process, with its exit code and captured output."""

from __future__ import annotations

import pytest

from runtime.cli import main
from tests.cli.invoke import Cli, Done


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``cli("list", "--db", path)``: main() in this process, its exit code and output."""
    monkeypatch.delenv("BIDE_DB", raising=False)

    def run(*argv: str) -> Done:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return Done(code, out, err)

    return run
