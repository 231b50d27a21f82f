"""What a fresh process imports: a command that reads or replays a finished run in an existing
journal loads none of the packages bide needs only for other work (SQLAlchemy and Alembic to
create or migrate a journal, pydantic and jsonschema to call tools, cryptography for signed
approvals, the MCP SDK, the PostgreSQL driver). Speed itself is measured in bench/startup.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.invoke import Cli
from tests.conftest import child_env, run_child

OPTIONAL = ("alembic", "asyncpg", "cryptography", "jsonschema", "mcp", "pydantic", "sqlalchemy")

PROBE = """
import json, sys
from runtime.cli import main
code = main(sys.argv[2:])
loaded = sorted({name.partition(".")[0] for name in sys.modules} & set(json.loads(sys.argv[1])))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def imported(*argv: str) -> tuple[int, list[str], str]:
    """Run the CLI with ``argv`` in a fresh process: its exit code, which of OPTIONAL it had
    imported when it finished, and its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(OPTIONAL), *argv],
        env={k: v for k, v in child_env().items() if k != "BIDE_DB"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["loaded"], done.stdout


@pytest.fixture
def finished(cli: Cli, db_path: Path) -> str:
    """A journal holding a finished run, r1, of an agent with a @tool."""
    done = cli(
        "run", "--db", str(db_path), "--agent", "tests.cli.agents:agent", "--run-id", "r1", "go"
    )
    assert done.code == 0, done.err
    return str(db_path)


def test_resuming_a_finished_run_imports_none_of_the_optional_packages(finished: str) -> None:
    code, loaded, out = imported("--db", finished, "resume", "r1")
    assert (code, out) == (0, "all done\n")
    assert loaded == []


@pytest.mark.parametrize("argv", [["show", "r1"], ["list"], ["show", "r1", "--json"]])
def test_reading_runs_imports_none_of_the_optional_packages(finished: str, argv: list[str]) -> None:
    code, loaded, out = imported("--db", finished, *argv)
    assert code == 0
    assert "r1" in out
    assert loaded == []


def test_the_probe_sees_what_a_command_that_needs_them_imports(tmp_path: Path) -> None:
    """Creating a journal migrates it (SQLAlchemy, Alembic); a run calls its tool (pydantic).
    Arguments that fit the tool's flat schema are accepted without jsonschema."""
    db = str(tmp_path / "new.db")
    code, loaded, _ = imported("--db", db, "run", "--agent", "tests.cli.agents:agent", "go")
    assert code == 0
    assert {"alembic", "pydantic", "sqlalchemy"} <= set(loaded)
    assert "jsonschema" not in loaded


def test_arguments_the_schema_refuses_are_worded_by_jsonschema(tmp_path: Path) -> None:
    db = str(tmp_path / "new.db")
    code, loaded, out = imported("--db", db, "run", "--agent", "tests.cli.agents:misfit", "go")
    assert (code, out) == (0, "all done\n")
    assert "jsonschema" in loaded


def test_importing_runtime_imports_none_of_them() -> None:
    done = run_child("import json, sys, runtime; print(json.dumps(sorted(sys.modules)))")
    assert done.returncode == 0, done.stderr
    assert {name.partition(".")[0] for name in json.loads(done.stdout)}.isdisjoint(OPTIONAL)
