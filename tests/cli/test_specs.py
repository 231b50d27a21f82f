"""Agent specs: every form that gives an Agent drives the run; anything else is exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime import Agent, Journal
from runtime.testing import ScriptedModel
from tests.cli import agents
from tests.cli.invoke import Cli, child


@pytest.mark.parametrize(
    "attr", ["agent", "sync_factory", "async_factory", "connected", "Holder.agent"]
)
def test_every_spec_form_that_gives_an_agent_drives_the_run(
    cli: Cli, db_path: Path, attr: str
) -> None:
    done = cli("run", "--db", str(db_path), "--agent", f"tests.cli.agents:{attr}", "go")
    assert (done.code, done.out) == (0, "all done\n"), done.err


def test_an_async_context_manager_is_entered_for_the_drive_and_exited_after(
    cli: Cli, db_path: Path
) -> None:
    agents.lifecycle.clear()
    done = cli("run", "--db", str(db_path), "--agent", "tests.cli.agents:connected", "go")
    assert done.code == 0
    assert agents.lifecycle == ["enter", "exit"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tests.cli.agents:not_an_agent", "gave int, not an Agent"),
        ("tests.cli.agents:returns_none", "gave NoneType, not an Agent"),
        ("tests.cli.agents:raises", "building the agent failed: RuntimeError: the tool server"),
        ("tests.cli.agents:missing", "tests.cli.agents has no attribute 'missing'"),
        ("tests.cli.no_such_module:agent", "no module named 'tests.cli.no_such_module'"),
        ("tests.cli.broken_agent:agent", "importing tests.cli.broken_agent failed: RuntimeError"),
        ("tests.cli.agents", "is not module:attr"),
    ],
)
def test_a_spec_that_gives_no_agent_is_one_error_line_naming_it_and_exit_2(
    cli: Cli, db_path: Path, spec: str, says: str
) -> None:
    done = cli("run", "--db", str(db_path), "--agent", spec, "go")
    assert done.code == 2
    assert done.error_line.startswith(f"bide: error: agent spec {spec!r}")
    assert says in done.error_line
    assert "Traceback" not in done.err
    assert not db_path.exists()  # the agent is loaded before a journal is created


def test_run_without_agent_needs_one_unless_the_run_journaled_it(cli: Cli, db_path: Path) -> None:
    db = str(db_path)
    done = cli("run", "--db", db, "--run-id", "r", "go")
    assert (done.code, done.error_line) == (
        2,
        "bide: error: run needs --agent MODULE:ATTR (the agent to drive)",
    )
    assert not db_path.exists()
    assert (
        cli("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "r", "go").code == 0
    )
    again = cli("run", "--db", db, "--run-id", "r", "go")
    assert (again.code, again.out) == (0, "all done\n")


def test_the_current_directory_is_importable_for_a_spec(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with `python -m`, even when started as the `bide` script (no cwd on sys.path)."""
    (tmp_path / "cwd_agent_mod.py").write_text(
        "from tests.cli.agents import agent\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        done = cli("run", "--agent", "cwd_agent_mod:agent", "go")
    finally:
        sys.modules.pop("cwd_agent_mod", None)
    assert done.code == 0, done.err
    assert (tmp_path / "bide.db").exists()


def test_resume_drives_with_the_journaled_spec_and_agent_overrides_it(
    cli: Cli, db_path: Path
) -> None:
    db = str(db_path)
    first = cli(
        "run", "--db", db, "--agent", "tests.cli.agents:one_turn_budget", "--run-id", "r", "go"
    )
    assert first.code == 1 and "max_turns=1" in first.error_line
    again = cli("resume", "--db", db, "r")  # the journaled spec: the budget again
    assert again.code == 1 and "max_turns=1" in again.error_line
    override = cli("resume", "--db", db, "r", "--agent", "tests.cli.agents:agent")
    assert (override.code, override.out) == (0, "all done\n"), override.err


async def test_resuming_a_run_started_without_a_spec_asks_for_one(
    journal: Journal, db_path: Path
) -> None:
    agent = Agent(model=ScriptedModel([{"text": "x"}]), name="lib")
    await agent.run("r2", "go", journal=journal)  # started by the library: no spec journaled
    done = child("resume", "--db", str(db_path), "r2")
    assert done.code == 2
    assert done.error_line == (
        "bide: error: run 'r2' was started without an agent spec; name its agent with "
        "--agent MODULE:ATTR"
    )
