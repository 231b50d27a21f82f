"""`run --agent path/to/agent.toml`: the example agent file with its MCP stdio server, and a
resume after SIGKILL that rebuilds the same agent from the journaled spec."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from runtime import Journal
from tests.cli.invoke import child
from tests.conftest import ROOT

SUPPORT = ROOT / "examples" / "support.toml"


def test_the_example_agent_file_runs_with_its_mcp_server(tmp_path: Path) -> None:
    db = tmp_path / "bide.db"
    done = child("--db", str(db), "run", "--run-id", "s1", "--agent", str(SUPPORT), "Refund A-1")
    assert done.code == 0, done.err
    assert done.out.strip() == "Refunded 5.00 on order A-1."


def test_a_run_killed_mid_turn_resumes_from_the_journaled_agent_file(tmp_path: Path) -> None:
    db = tmp_path / "bide.db"
    # Killed after the IDEMPOTENT set_status returned and before its result was recorded.
    killed = child(
        "--db",
        str(db),
        "run",
        "--run-id",
        "s1",
        "--agent",
        "examples/support.toml",
        "Refund A-1",
        cwd=ROOT,
        BIDE_CRASH="tool.after_call@2",
    )
    assert killed.code == -signal.SIGKILL, killed.err
    # From another directory and without --agent: the journaled absolute path is used.
    resumed = child("--db", str(db), "resume", "s1", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert resumed.out.strip() == "Refunded 5.00 on order A-1."

    async def check() -> None:
        async with Journal(db) as journal:
            state = await journal.require("s1")
        assert state.start is not None and state.start["spec"] == str(SUPPORT)
        assert state.status() == "completed"
        assert [c.call.id for c in state.calls.values() if c.result is not None] == [
            "c1",
            "c2",
            "c3",
        ]

    asyncio.run(check())


def test_a_side_effect_killed_after_it_left_halts_on_resume(tmp_path: Path) -> None:
    db = tmp_path / "bide.db"
    killed = child(
        "--db",
        str(db),
        "run",
        "--run-id",
        "s1",
        "--agent",
        str(SUPPORT),
        "Refund A-1",
        BIDE_CRASH="tool.after_call@3",
    )
    assert killed.code == -signal.SIGKILL, killed.err
    resumed = child("--db", str(db), "resume", "s1")
    assert resumed.code == 4, resumed.err
    assert "c3" in resumed.err


def test_a_broken_agent_file_is_a_usage_error_naming_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nprovider = "scripted"\n')
    done = child("--db", str(tmp_path / "bide.db"), "run", "--agent", str(bad), "hi")
    assert done.code == 2
    assert str(bad) in done.error_line and "model.scripted.script" in done.error_line
    assert not (tmp_path / "bide.db").exists()


def test_an_mcp_server_command_that_does_not_exist_is_one_line_naming_the_server(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent.toml"
    agent.write_text(
        '[model]\nprovider = "scripted"\nscript = "script.json"\n\n'
        '[[mcp]]\nname = "orders"\ncommand = "no-such-mcp-server-xyz"\n'
    )
    (tmp_path / "script.json").write_text('[{"text": "hi"}]')
    db = tmp_path / "bide.db"
    done = child("--db", str(db), "run", "--agent", str(agent), "go")
    assert done.code == 2
    assert done.err.splitlines() == [
        f"bide: error: {agent}: mcp[orders]: cannot start command 'no-such-mcp-server-xyz': "
        "no such executable on its PATH"
    ]
    assert not db.exists()


def test_an_mcp_server_that_exits_at_start_is_one_line_with_the_tail_of_its_stderr(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent.toml"
    code = "import sys; print('fatal: ORDERS_URL is not set', file=sys.stderr); sys.exit(3)"
    agent.write_text(
        '[model]\nprovider = "scripted"\nscript = "script.json"\n\n'
        f'[[mcp]]\nname = "orders"\ncommand = "python"\nargs = ["-c", "{code}"]\n'
    )
    (tmp_path / "script.json").write_text('[{"text": "hi"}]')
    done = child("--db", str(tmp_path / "bide.db"), "run", "--agent", str(agent), "go")
    assert done.code == 1
    assert "Traceback" not in done.err
    assert done.error_line == (
        "bide: error: ProtocolError: MCP server 'orders' closed its stdout and exited with "
        "status 3; its last stderr: fatal: ORDERS_URL is not set"
    )
