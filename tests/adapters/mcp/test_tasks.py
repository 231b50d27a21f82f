"""MCP tasks: a call the server answers with a task journals the task id before anything else,
is polled to its end, and after a halt or a crash is polled again instead of halting for good.

Against an in-process server that serves the tasks extension (``task_server``); the crash tests
with real processes are in ``test_tasks_crash.py``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus, Safety
from runtime import records as R
from runtime.errors import ProtocolError, ToolOutcomeUnknown
from runtime.retry import RetryPolicy
from runtime.testing import ScriptedModel
from runtime.tools import ToolContext, idempotency_key_for, resumer
from tests.adapters.mcp.task_server import Tasks, task_server

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
    {"text": "charged"},
]


async def drive(
    db: Path,
    extension: Tasks,
    *,
    tasks: bool = True,
    wait: float = 10,
    resume: bool = False,
    safety: Safety = Safety.SIDE_EFFECT,
) -> Any:
    async with connect(task_server(extension), tasks=tasks, name="tasks") as session:
        listed = await tools(session, call_timeout=wait, safety={"charge": safety})
        retry = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.01)
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed, tool_retry=retry)
        async with Journal(db) as journal:
            if resume:
                result = await agent.resume("r", journal=journal)
            else:
                result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    return result, state


@pytest.mark.parametrize("nested", [False, True], ids=["published", "nested"])
async def test_the_task_id_is_journaled_before_the_result_and_the_result_comes_by_polling(
    db_path: Path, nested: bool
) -> None:
    """Both shapes of a task answer: the published one (flattened) and the drafts' (nested)."""
    extension = Tasks(None, seconds=0.2, nested=nested)
    result, state = await drive(db_path, extension)
    assert result.status is RunStatus.COMPLETED and result.output == "charged"
    kinds = [r.kind for r in state.records if r.payload and r.payload.get("call_id") == "c1"]
    assert kinds == [R.ATTEMPT, R.HANDLE, R.HANDLE, R.RESULT]
    assert state.calls["c1"].handles[1][1].payload["handle"] == {
        "mcp_call": {"server": "tasks", "principal": None}
    }
    handle = state.calls["c1"].handles[1][2].payload["handle"]
    (task_id,) = extension.tasks
    assert handle == {"mcp_task": task_id, "server": "tasks"}
    content, is_error = state.calls["c1"].message_content()
    assert not is_error and content[0]["text"] == '{"charged": 5}'
    assert extension.count("call") == 1 and extension.count("get") >= 1
    assert extension.seen[0] == f"call charge {idempotency_key_for('r', 'c1')}"


async def test_without_the_opt_in_the_server_answers_plainly_and_nothing_is_journaled(
    db_path: Path,
) -> None:
    extension = Tasks(None, seconds=0.2)
    result, state = await drive(db_path, extension, tasks=False)
    assert result.status is RunStatus.COMPLETED
    assert extension.seen == ["call-plain charge"]
    # Only the step naming the server, before the call left: no task id.
    (step,) = [r.payload["handle"] for r in state.records if r.kind == R.HANDLE]
    assert set(step) == {"mcp_call"}


async def test_polling_keeps_to_the_servers_interval(db_path: Path) -> None:
    extension = Tasks(None, seconds=0.5, poll_ms=200)
    started = time.monotonic()
    result, _ = await drive(db_path, extension)
    assert result.status is RunStatus.COMPLETED
    # 0.5 s of work polled every 0.2 s: three polls at most, the last seeing it done.
    assert 1 <= extension.count("get") <= 3
    assert time.monotonic() - started >= 0.5


async def test_a_task_past_the_tools_timeout_halts_and_a_resume_polls_it_to_its_result(
    db_path: Path,
) -> None:
    extension = Tasks(None, seconds=1.5)
    result, state = await drive(db_path, extension, wait=0.4)
    assert result.status is RunStatus.HALTED
    assert state.status() == "halted" and state.calls["c1"].handle is not None
    await asyncio.sleep(1.2)  # the task finishes meanwhile, on the server
    result, state = await drive(db_path, extension, wait=5, resume=True)
    assert result.status is RunStatus.COMPLETED
    assert extension.count("call") == 1  # polled, never sent again
    assert state.calls["c1"].message_content()[0][0]["text"] == '{"charged": 5}'


async def test_a_failed_task_is_a_definite_error_result(db_path: Path) -> None:
    extension = Tasks(None, seconds=0.1, fail=True)
    result, state = await drive(db_path, extension)
    assert result.status is RunStatus.COMPLETED  # the model saw the error and answered
    content, is_error = state.calls["c1"].message_content()
    assert is_error and "the card was declined" in content["message"]


async def test_a_task_the_server_cancelled_halts_a_side_effect_now_and_on_every_resume(
    db_path: Path,
) -> None:
    """A cancelled task may have acted before it stopped: never an error the model may retry."""
    extension = Tasks(None, seconds=0.1, cancel_first=1)
    result, state = await drive(db_path, extension)
    assert result.status is RunStatus.HALTED
    assert state.status() == "halted" and state.calls["c1"].result is None
    assert "cancelled" in (state.calls["c1"].halt_cause or "")
    result, state = await drive(db_path, extension, resume=True)
    assert result.status is RunStatus.HALTED  # polled again: still cancelled, still unknown
    assert state.calls["c1"].result is None
    assert extension.count("call") == 1  # the charge was made once and never sent again
    assert len(state.turns) == 1  # the model was never told "failed" and asked again


async def test_a_retry_safe_call_whose_task_was_cancelled_is_retried_with_the_same_key(
    db_path: Path,
) -> None:
    extension = Tasks(None, seconds=0.1, cancel_first=1)
    result, state = await drive(db_path, extension, safety=Safety.IDEMPOTENT)
    assert result.status is RunStatus.COMPLETED
    content, is_error = state.calls["c1"].message_content()
    assert not is_error and content[0]["text"] == '{"charged": 5}'
    key = idempotency_key_for("r", "c1")
    assert [line for line in extension.seen if line.startswith("call")] == [
        f"call charge {key}",
        f"call charge {key}",
    ]


async def test_cancelling_the_run_cancels_its_open_task_and_leaves_the_call_unresolved(
    db_path: Path,
) -> None:
    extension = Tasks(None, seconds=60)
    result, _ = await drive(db_path, extension, wait=0.3)
    assert result.status is RunStatus.HALTED
    async with Journal(db_path) as journal:
        await journal.cancel("r", reason="withdrawn")
    result, state = await drive(db_path, extension, resume=True)
    assert result.status is RunStatus.CANCELLED
    (task_id,) = extension.tasks
    assert f"cancel {task_id}" in extension.seen and extension.count("call") == 1
    assert [c.call.id for c in state.unresolved_calls()] == ["c1"]


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("no_id", "no usable task id"),
        ("odd_status", 'status "sleeping"'),
    ],
)
@pytest.mark.parametrize("nested", [False, True], ids=["published", "nested"])
async def test_a_broken_task_answer_is_a_protocol_error_naming_the_server(
    tool: str, said: str, nested: bool
) -> None:
    extension = Tasks(None, seconds=0, nested=nested)
    async with connect(task_server(extension), tasks=True, name="tasks") as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        context = ToolContext(run_id="r", call_id="c1", tool_name=tool)
        with pytest.raises(ProtocolError, match=f"MCP server 'tasks' .*{said}"):
            await by_name[tool].call({}, context)


async def test_a_task_answer_both_flattened_and_nested_is_refused() -> None:
    """The two could name different tasks: which one to journal and poll cannot be told."""
    async with connect(task_server(Tasks(None, seconds=0)), tasks=True, name="tasks") as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        context = ToolContext(run_id="r", call_id="c1", tool_name="both_shapes")
        with pytest.raises(ProtocolError, match=r"MCP server 'tasks' .*both flattened"):
            await by_name["both_shapes"].call({}, context)


@pytest.mark.parametrize(
    ("reading", "said"),
    [
        ({"status": "completed"}, "no usable task id"),
        ({"taskId": "other", "status": "working"}, 'with task "other"'),
        ({"taskId": "T", "status": "done"}, 'status "done"'),
        ({"taskId": "T", "status": "working", "pollIntervalMs": "soon"}, "pollIntervalMs"),
        ({"taskId": "T", "status": "completed"}, "sent no result"),
        ({"taskId": "T", "status": "completed", "result": {"content": 3}}, "not a tool result"),
    ],
)
async def test_a_broken_tasks_get_answer_is_a_protocol_error_naming_the_server(
    reading: dict[str, Any], said: str
) -> None:
    extension = Tasks(None, seconds=0)
    extension.hostile_get = reading
    async with connect(task_server(extension), tasks=True, name="tasks") as session:
        (charge,) = [t for t in await tools(session) if t.spec.name == "charge"]
        context = ToolContext(run_id="r", call_id="c1", tool_name="charge")
        resume = resumer(charge)
        assert resume is not None
        with pytest.raises(ProtocolError, match=f"MCP server 'tasks' .*{said}"):
            await resume({"mcp_task": "T", "server": "tasks"}, {"amount": 5}, context)


async def test_a_task_the_server_no_longer_knows_is_an_unknown_outcome() -> None:
    """A lost task proves nothing either: polling it fails as unknown, never as "failed"."""
    async with connect(task_server(Tasks(None, seconds=0)), tasks=True, name="tasks") as session:
        (charge,) = [t for t in await tools(session) if t.spec.name == "charge"]
        context = ToolContext(run_id="r", call_id="c1", tool_name="charge")
        resume = resumer(charge)
        assert resume is not None
        with pytest.raises(ToolOutcomeUnknown, match='polling task "gone" failed'):
            await resume({"mcp_task": "gone", "server": "tasks"}, {"amount": 5}, context)
