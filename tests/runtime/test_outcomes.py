"""The outcome table: how each way a call can end is recorded, and whether the run goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import (
    Agent,
    Journal,
    RetryPolicy,
    RunStatus,
    Safety,
    ToolContext,
    ToolError,
    ToolOutcomeUnknown,
    tool,
)
from runtime.testing import ScriptedModel
from tests.helpers import Ledger, call, flaky, slow

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.002)


def one_call(name: str) -> list[dict[str, Any]]:
    return [{"tool_calls": [call("c1", name)]}, {"text": "done"}]


async def drive(journal: Journal, *tools: Any, script: Any = None, **kw: Any) -> Any:
    agent = Agent(
        model=ScriptedModel(script or one_call(tools[0].spec.name)),
        tools=list(tools),
        tool_retry=kw.pop("tool_retry", FAST),
        **kw,
    )
    return await agent.run("r", "go", journal=journal)


async def content(journal: Journal, call_id: str = "c1") -> tuple[Any, bool]:
    return (await journal.require("r")).calls[call_id].message_content()


async def test_a_returned_value_is_recorded_and_the_run_continues(journal: Journal) -> None:
    ledger = Ledger()
    result = await drive(journal, flaky(ledger, "ping", Safety.SIDE_EFFECT, []))
    assert result.status is RunStatus.COMPLETED
    assert await content(journal) == ({"ok": 1}, False)


@pytest.mark.parametrize("safety", list(Safety))
async def test_a_tool_error_is_data_the_model_sees_and_is_never_retried(
    journal: Journal, safety: Safety
) -> None:
    ledger = Ledger()
    result = await drive(journal, flaky(ledger, "t", safety, [ToolError("nope")]))
    assert result.status is RunStatus.COMPLETED
    assert await content(journal) == ({"type": "ToolError", "message": "nope"}, True)
    assert ledger.count("t") == 1


async def test_a_side_effect_that_times_out_halts_records_nothing_and_halts_on_every_resume(
    journal: Journal,
) -> None:
    ledger = Ledger()
    t = slow(ledger, "wire", Safety.SIDE_EFFECT, 5, timeout=0.05)
    result = await drive(journal, t)
    assert result.status is RunStatus.HALTED
    assert result.halt is not None and "timed out" in result.halt.cause
    state = await journal.require("r")
    assert state.calls["c1"].result is None
    again = await Agent(model=ScriptedModel(one_call("wire")), tools=[t]).resume(
        "r", journal=journal
    )
    assert again.status is RunStatus.HALTED
    assert ledger.count("wire") == 1


@pytest.mark.parametrize(
    "failure",
    [ToolOutcomeUnknown("reset"), RuntimeError("boom"), ConnectionError("lost")],
    ids=["outcome-unknown", "runtime-error", "connection-error"],
)
async def test_a_side_effect_ending_in_anything_but_a_tool_error_halts(
    journal: Journal, failure: BaseException
) -> None:
    ledger = Ledger()
    result = await drive(journal, flaky(ledger, "pay", Safety.SIDE_EFFECT, [failure]))
    assert result.status is RunStatus.HALTED
    assert ledger.count("pay") == 1


@pytest.mark.parametrize("safety", [Safety.READ_ONLY, Safety.IDEMPOTENT])
async def test_a_retry_safe_call_is_retried_with_the_same_key_then_succeeds(
    journal: Journal, safety: Safety
) -> None:
    ledger = Ledger()
    failures: list[BaseException] = [ToolOutcomeUnknown("reset"), TimeoutError()]
    result = await drive(journal, flaky(ledger, "t", safety, failures))
    assert result.status is RunStatus.COMPLETED
    assert ledger.count("t") == 3
    assert len(set(ledger.keys("t"))) == 1
    assert await content(journal) == ({"ok": 3}, False)


async def test_a_retry_safe_call_that_keeps_failing_records_the_error_and_never_halts(
    journal: Journal,
) -> None:
    ledger = Ledger()
    failures: list[BaseException] = [RuntimeError("a"), RuntimeError("b"), RuntimeError("c")]
    result = await drive(journal, flaky(ledger, "t", Safety.READ_ONLY, failures))
    assert result.status is RunStatus.COMPLETED
    value, is_error = await content(journal)
    assert is_error and "after 3 attempts" in value["message"]


async def test_a_retry_safe_call_that_times_out_is_retried_per_policy(journal: Journal) -> None:
    ledger = Ledger()
    t = slow(ledger, "t", Safety.IDEMPOTENT, 5, timeout=0.02)
    result = await drive(journal, t, tool_retry=RetryPolicy(max_attempts=2, initial_delay=0))
    assert result.status is RunStatus.COMPLETED
    assert ledger.count("t") == 2
    value, is_error = await content(journal)
    assert is_error and "timed out" in value["message"]


async def test_a_value_that_is_not_json_is_recorded_as_an_error_saying_the_tool_ran(
    journal: Journal,
) -> None:
    class Opaque:
        spec = flaky(Ledger(), "opaque", Safety.SIDE_EFFECT, []).spec

        async def call(self, arguments: Any, context: Any = None) -> Any:
            return {"x": object()}

    result = await drive(journal, Opaque())
    assert result.status is RunStatus.COMPLETED
    value, is_error = await content(journal)
    assert is_error and value["type"] == "unrecordable_result"
    assert value["message"] == (
        "opaque ran, but its result cannot be journaled: result.x: object is not JSON"
    )


async def test_cancelling_the_drive_mid_call_records_nothing_and_the_side_effect_halts_on_resume(
    journal: Journal,
) -> None:
    ledger = Ledger()
    t = slow(ledger, "wire", Safety.SIDE_EFFECT, 10)
    agent = Agent(model=ScriptedModel(one_call("wire")), tools=[t])
    task = asyncio.create_task(agent.run("r", "go", journal=journal))
    while ledger.count("wire") == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await agent.resume("r", journal=journal)
    assert result.status is RunStatus.HALTED
    assert ledger.count("wire") == 1


async def test_the_calls_of_one_turn_run_concurrently(journal: Journal) -> None:
    both = asyncio.Barrier(2)

    @tool(safety=Safety.READ_ONLY)
    async def a() -> str:
        await asyncio.wait_for(both.wait(), 5)
        return "a"

    @tool(safety=Safety.READ_ONLY)
    async def b() -> str:
        await asyncio.wait_for(both.wait(), 5)
        return "b"

    script = [{"tool_calls": [call("c1", "a"), call("c2", "b")]}, {"text": "ok"}]
    result = await drive(journal, a, b, script=script)
    assert result.status is RunStatus.COMPLETED


async def test_max_concurrency_bounds_the_calls_running_at_once(journal: Journal) -> None:
    running = 0
    peak = 0

    @tool(safety=Safety.READ_ONLY)
    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    script = [{"tool_calls": [call(f"c{i}", "work", n=i) for i in range(6)]}, {"text": "ok"}]
    result = await drive(journal, work, script=script, max_concurrency=2)
    assert result.status is RunStatus.COMPLETED
    assert peak == 2


async def test_a_halt_in_one_call_never_cancels_its_siblings(journal: Journal) -> None:
    ledger = Ledger()
    quick_halt = flaky(ledger, "pay", Safety.SIDE_EFFECT, [ToolOutcomeUnknown("lost")])
    sibling = slow(ledger, "ship", Safety.SIDE_EFFECT, 0.2)
    script = [{"tool_calls": [call("c1", "pay"), call("c2", "ship")]}, {"text": "ok"}]
    result = await drive(journal, quick_halt, sibling, script=script)
    assert result.status is RunStatus.HALTED
    assert [h.call_id for h in result.halts] == ["c1"]
    state = await journal.require("r")
    assert state.calls["c2"].message_content() == ({"slept": 0.2}, False)


async def test_the_idempotency_key_is_stable_across_attempts_and_resumes(journal: Journal) -> None:
    keys: list[str] = []

    @tool(safety=Safety.IDEMPOTENT)
    async def upsert(context: ToolContext) -> str:
        keys.append(context.idempotency_key)
        if len(keys) == 1:
            raise ToolOutcomeUnknown("first try lost")
        return "ok"

    await drive(journal, upsert)
    assert len(keys) == 2 and keys[0] == keys[1]
    assert keys[0].startswith("bide-") and len(keys[0]) == 37
    other_run_key = ToolContext(run_id="other", call_id="c1", tool_name="upsert").idempotency_key
    assert other_run_key != keys[0]
    same_key = ToolContext(run_id="r", call_id="c1", tool_name="upsert").idempotency_key
    assert same_key == keys[0]


async def test_a_tool_errors_data_travels_with_its_message(journal: Journal) -> None:
    ledger = Ledger()
    failure = ToolError("declined", data={"code": "insufficient_funds", "retry": False})
    await drive(journal, flaky(ledger, "pay", Safety.SIDE_EFFECT, [failure]))
    assert await content(journal) == (
        {
            "type": "ToolError",
            "message": "declined",
            "data": {"code": "insufficient_funds", "retry": False},
        },
        True,
    )


async def test_the_exception_behind_a_halt_is_journaled_and_told_on_every_later_resume(
    journal: Journal,
) -> None:
    class Provider:
        spec = flaky(Ledger(), "charge", Safety.SIDE_EFFECT, []).spec

        async def call(self, arguments: Any, context: Any = None) -> Any:
            raise RuntimeError("provider said 502")

    result = await drive(journal, Provider())
    assert result.status is RunStatus.HALTED
    state = await journal.require("r")
    (record,) = [r for r in state.records if r.kind == "halt"]
    assert record.payload["error_type"] == "RuntimeError"
    assert "raised RuntimeError: provider said 502" in record.payload["cause"]
    again = await drive(journal, Provider())
    assert again.status is RunStatus.HALTED and again.halt is not None
    assert "when it halted: raised RuntimeError: provider said 502" in again.halt.cause
    assert [r.kind for r in (await journal.require("r")).records].count("halt") == 1
