"""MCP tasks across a SIGKILL: a real host process (the CLI) driving a charge that a real server
process over streamable HTTP answers as a task; the server outlives the host and counts the calls.

Killed once the task id is journaled, a resume in a new process polls the task to its result
and the server saw the call once. Killed after the call left and before the task id arrived, a
resume halts: that window is an unknown outcome.
"""

from __future__ import annotations

from pathlib import Path

from tests.adapters.mcp.processes import Serve, count, host_process, kill_when, lines, load_state
from tests.cli.invoke import child

RUN = ("run", "--agent", "tests.adapters.mcp.task_agent:charging", "--run-id", "r", "go")


def test_a_host_killed_while_its_task_runs_gets_the_result_by_polling_on_resume(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve("task_server", TASK_SECONDS="3", POLL_MS="100")
    host = host_process(*RUN, "--db", str(db), TASK_SERVER=url)
    # The server is polled only after the task id is committed: a poll means it is journaled.
    kill_when(host, ledger, "get")
    call = load_state(db).calls["c1"]
    assert call.handle is not None and call.result is None
    assert call.resumable and not call.halted  # knowable: not halted
    seen = len(lines(ledger))
    resumed = child("resume", "--db", str(db), "r", TASK_SERVER=url)
    assert (resumed.code, resumed.out) == (0, "charged\n"), resumed.err
    assert count(ledger, "call") == 1  # the server saw the call once
    assert any(line.startswith("get ") for line in lines(ledger)[seen:])  # by polling
    content, is_error = load_state(db).calls["c1"].message_content()
    assert not is_error and content[0]["text"] == '{"charged": 5}'


def test_a_host_killed_between_sending_the_call_and_journaling_its_task_id_halts(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve("task_server", TASK_SECONDS="0", ANSWER_DELAY="30")
    host = host_process(*RUN, "--db", str(db), TASK_SERVER=url)
    kill_when(host, ledger, "call")  # the server acted; its task id has not reached the host
    call = load_state(db).calls["c1"]
    # Only the in-flight step naming the server: no task id reached the journal.
    assert call.marker is not None and call.handle is not None and call.handle.in_flight
    assert set(call.handle.value) == {"mcp_call"}
    resumed = child("resume", "--db", str(db), "r", TASK_SERVER=url)
    assert resumed.code == 4, resumed.err  # halted: the outcome is unknown
    assert count(ledger, "call") == 1  # and never sent again
    assert load_state(db).status() == "halted"
