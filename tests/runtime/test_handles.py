"""The handle seam: a side effect that journals a handle mid-attempt is continued on resume
through its tool's ``resume`` instead of halting; without the handle, or without ``resume``, the
attempt halts as any attempt without a result does."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime import Agent, Journal, RunStatus, Safety, ToolSpec
from runtime import records as R
from runtime.errors import ToolOutcomeUnknown
from runtime.stops import halted_on
from runtime.testing import ScriptedModel
from runtime.timeline import timeline
from runtime.tools import ToolContext

SCRIPT = [{"tool_calls": [{"id": "c1", "name": "job", "arguments": {"n": 1}}]}, {"text": "ok"}]


class Job:
    """A side effect that hands its work to a queue: it journals the job's id, then waits."""

    def __init__(self, *, safety: Safety = Safety.SIDE_EFFECT, resumable: bool = True) -> None:
        self.spec = ToolSpec(name="job", safety=safety, timeout=5)
        self.submitted = 0
        self.resumed: list[Any] = []
        self.cancelled: list[Any] = []
        self.recorded: list[bool] = []
        self.finish: asyncio.Future[str] | None = None
        self.after_handle: Exception | None = None
        if not resumable:
            self.resume = None  # type: ignore[assignment]

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        assert context is not None
        self.submitted += 1
        self.recorded.append(await context.record_handle({"job": "j-7"}))
        if self.after_handle is not None:
            raise self.after_handle
        self.finish = asyncio.get_running_loop().create_future()
        return await self.finish

    async def resume(self, handle: Any, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        self.resumed.append(handle)
        return f"job {handle['job']} done"

    async def cancel_handle(self, handle: Any, context: ToolContext) -> None:
        self.cancelled.append(handle)


async def _run(db: Path, tool: Any, *, input: str | None = "go") -> Any:
    agent = Agent(model=ScriptedModel(SCRIPT), tools=[tool])
    async with Journal(db) as journal:
        if input is None:
            return await agent.resume("r", journal=journal)
        return await agent.run("r", input, journal=journal)


async def _state(db: Path) -> Any:
    async with Journal(db) as journal:
        return await journal.require("r")


async def _cut_off(db: Path, job: Job) -> None:
    """Drive until the job waits on its handle, then stop the drive as a dying process would."""
    drive = asyncio.ensure_future(_run(db, job))
    while job.finish is None:
        await asyncio.sleep(0.01)
    drive.cancel()
    await asyncio.gather(drive, return_exceptions=True)


async def test_a_journaled_handle_is_resumed_instead_of_halting(db_path: Path) -> None:
    job = Job()
    await _cut_off(db_path, job)
    state = await _state(db_path)
    call = state.calls["c1"]
    assert call.handle == R.Handle(call_id="c1", attempt=1, n=1, tool="job", value={"job": "j-7"})
    assert call.unknown_outcome and call.resumable and not call.halted
    assert state.status() == "running" and state.halted_calls() == []
    assert state.live_status(None) == "orphaned"  # a resume (or a worker) continues it
    told = timeline(state)
    assert (told.status, told.halted) == ("orphaned", ())  # not shown as halted
    assert halted_on(state) == ()

    result = await _run(db_path, job, input=None)
    assert result.status is RunStatus.COMPLETED
    assert job.submitted == 1 and job.resumed == [{"job": "j-7"}]
    content, is_error = (await _state(db_path)).calls["c1"].message_content()
    assert (content, is_error) == ("job j-7 done", False)


async def test_an_attempt_that_halts_after_its_handle_is_halted_and_a_resume_tries_again(
    db_path: Path,
) -> None:
    job = Job()
    job.after_handle = ToolOutcomeUnknown("the queue did not answer")
    result = await _run(db_path, job)
    assert result.status is RunStatus.HALTED
    state = await _state(db_path)
    assert state.status() == "halted" and state.calls["c1"].halted
    assert (await _run(db_path, job, input=None)).status is RunStatus.COMPLETED
    assert job.submitted == 1 and len(job.resumed) == 1


async def test_a_handle_whose_tool_cannot_resume_halts(db_path: Path) -> None:
    job = Job()
    await _cut_off(db_path, job)
    result = await _run(db_path, Job(resumable=False), input=None)
    assert result.status is RunStatus.HALTED
    (halt,) = result.halts
    assert "journaled a handle" in halt.cause and "may have acted" in halt.cause


async def test_a_retry_safe_call_journals_no_handle(db_path: Path) -> None:
    job = Job(safety=Safety.IDEMPOTENT)
    job.after_handle = ToolOutcomeUnknown("lost")  # then retried: the handle is never needed
    await _run(db_path, job)
    assert job.recorded and not any(job.recorded)
    state = await _state(db_path)
    assert not [r for r in state.records if r.kind == R.HANDLE]


async def test_cancelling_a_run_asks_the_tool_to_cancel_its_open_handle(db_path: Path) -> None:
    job = Job()
    await _cut_off(db_path, job)
    async with Journal(db_path) as journal:
        await journal.cancel("r", reason="withdrawn")
    result = await _run(db_path, job, input=None)
    assert result.status is RunStatus.CANCELLED
    assert job.cancelled == [{"job": "j-7"}] and job.resumed == []
    # Cancelling says nothing about what the job did: the call stays unresolved.
    assert [c.call.id for c in (await _state(db_path)).unresolved_calls()] == ["c1"]


class Confirming(Job):
    """A side effect that journals a handle, then asks a person before its next request."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []
        self.crash_in_flight = False

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        assert context is not None
        self.submitted += 1
        await context.record_handle({"state": "s1"})
        return await self.resume({"state": "s1"}, arguments, context)

    async def resume(self, handle: Any, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        answer = await context.interrupt("confirm", "Go on?", expect=dict)
        await context.record_handle({"sending": handle["state"]}, in_flight=True)
        self.sent.append(handle["state"])
        if self.crash_in_flight:
            raise asyncio.CancelledError  # the process dies with the request out
        return f"confirmed {answer['ok']}"


async def test_a_side_effect_with_a_handle_may_ask_and_is_continued_once_answered(
    db_path: Path,
) -> None:
    tool = Confirming()
    result = await _run(db_path, tool)
    assert result.status is RunStatus.WAITING
    (waiting,) = result.waiting
    assert (waiting.kind, waiting.key) == ("input", "confirm")
    state = await _state(db_path)
    assert state.status() == "waiting" and [c.call.id for c in state.waiting_calls()] == ["c1"]
    async with Journal(db_path) as journal:
        await journal.answer("r", "confirm", {"ok": True})
    assert (await _run(db_path, tool, input=None)).status is RunStatus.COMPLETED
    assert tool.submitted == 1 and tool.sent == ["s1"]
    steps = (await _state(db_path)).calls["c1"].handles[1]
    assert [steps[n].payload["in_flight"] for n in sorted(steps)] == [False, True]


async def test_a_crash_with_a_further_request_in_flight_halts(db_path: Path) -> None:
    tool = Confirming()
    await _run(db_path, tool)
    async with Journal(db_path) as journal:
        await journal.answer("r", "confirm", {"ok": True})
    tool.crash_in_flight = True
    drive = asyncio.ensure_future(_run(db_path, tool, input=None))
    await asyncio.gather(drive, return_exceptions=True)
    state = await _state(db_path)
    assert state.status() == "halted" and state.calls["c1"].handle is not None
    tool.crash_in_flight = False
    result = await _run(db_path, tool, input=None)
    assert result.status is RunStatus.HALTED
    (halt,) = result.halts
    assert "step 2" in halt.cause and "may have acted" in halt.cause
    assert tool.sent == ["s1"]  # never sent again
