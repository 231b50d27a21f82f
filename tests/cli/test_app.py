"""The CLI as a whole: help, usage errors, where the journal is, logging, unexpected errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli.app import COMMANDS
from tests.cli.invoke import Cli, child

NAMES = [
    "run",
    "resume",
    "submit",
    "worker",
    "schedule",
    "queue",
    "list",
    "show",
    "sessions",
    "resolve",
    "cancel",
    "reconcile",
    "approve",
    "answer",
    "signal",
    "keygen",
    "migrate",
    "verify",
    "demo",
    "console",
]


def test_help_lists_every_command_with_an_example() -> None:
    done = child("--help")
    assert done.code == 0
    assert [c.name for c in COMMANDS] == NAMES
    for name in NAMES:
        assert f"    {name} " in done.out
    assert "example:\n  python -m runtime demo" in done.out
    assert "4 halted" in done.out


@pytest.mark.parametrize("name", NAMES)
def test_each_command_explains_itself_with_an_example(cli: Cli, name: str) -> None:
    done = cli(name, "--help")
    assert done.code == 0
    assert f"usage: bide {name}" in done.out
    example = done.out.split("example:\n", 1)[1]
    assert example.lstrip().startswith(f"bide {name}")


def test_a_usage_error_is_exit_2_with_a_bide_error_line(cli: Cli) -> None:
    for argv in (["frobnicate"], ["list", "--limit", "0"], ["run"], []):
        done = cli(*argv)
        assert done.code == 2, argv
        assert done.error_line.startswith("bide: error: "), done.err


def test_the_journal_is_db_else_bide_db_else_the_current_directory(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = ["run", "--agent", "tests.cli.agents:agent", "go"]
    assert cli(*run).code == 0
    assert (tmp_path / "bide.db").exists()
    monkeypatch.setenv("BIDE_DB", str(tmp_path / "env.db"))
    assert cli(*run).code == 0
    assert (tmp_path / "env.db").exists()
    assert cli("--db", str(tmp_path / "flag.db"), *run).code == 0  # before the command too
    counts = {
        name: len(cli("list", "--db", str(tmp_path / name), "--json").json()["runs"])
        for name in ("bide.db", "env.db", "flag.db")
    }
    assert counts == {"bide.db": 1, "env.db": 1, "flag.db": 1}


def test_bide_db_is_read_by_a_child_process_too(tmp_path: Path) -> None:
    db = tmp_path / "from-env.db"
    done = child("run", "--agent", "tests.cli.agents:agent", "go", cwd=tmp_path, BIDE_DB=str(db))
    assert done.code == 0, done.err
    assert db.exists() and not (tmp_path / "bide.db").exists()


def test_a_bide_error_is_one_line_and_v_adds_the_traceback(cli: Cli, db_path: Path) -> None:
    argv = ["run", "--db", str(db_path), "--agent", "tests.cli.agents:model_crashes", "go"]
    quiet = cli(*argv)
    assert quiet.code == 1
    assert quiet.error_line == (
        "bide: error: unexpected ValueError: a bug in the model adapter (run again with -v for "
        "the traceback)"
    )
    assert "Traceback" not in quiet.err
    loud = cli("-v", *argv)
    assert loud.code == 1
    assert "Traceback (most recent call last)" in loud.err
    assert loud.error_line == "bide: error: unexpected ValueError: a bug in the model adapter"


def test_v_turns_on_debug_logs_and_q_keeps_only_warnings(cli: Cli, db_path: Path) -> None:
    argv = ["run", "--db", str(db_path), "--agent", "tests.cli.agents:agent"]
    loud = cli("-v", *argv, "--run-id", "a", "go")
    assert "tool_result" in [e["event"] for e in loud.events()]  # a debug event
    quiet = cli("-q", *argv, "--run-id", "b", "go")
    assert (quiet.code, quiet.out, quiet.err) == (0, "all done\n", "")


def test_progress_lines_are_json_lines_off_a_terminal_and_sentences_on_the_console(
    db_path: Path,
) -> None:
    argv = ["run", "--db", str(db_path), "--agent", "tests.cli.agents:agent"]
    as_json = child(*argv, "--run-id", "a", "go")
    lines = as_json.err.splitlines()
    assert lines and all(json.loads(line)["message"] for line in lines)
    console = child("--log-format", "console", *argv, "--run-id", "b", "go")
    assert "{" not in console.err
    assert "turn 1: 1 tool call(s)" in console.err
    assert "lookup started [read_only] call c1" in console.err
    assert "run b started (tests.cli.agents:agent)" in console.err
