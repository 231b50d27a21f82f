"""Declared reconcilers settle halts by themselves, journaling their evidence, and never say
"it did not happen" while the attempt's owner lives or before its settle time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    ConfigError,
    Journal,
    Owner,
    Resolution,
    RunStatus,
    Safety,
    ToolContext,
    ToolOutcomeUnknown,
    tool,
)
from runtime import records as R
from runtime.reconcile import Absent, Attempt, Found, Unknown, settle_run
from runtime.testing import ScriptedModel
from runtime.timeline import render, timeline
from tests.helpers import call

SCRIPT = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]


class Provider:
    """A payment provider that finds charges by idempotency key."""

    def __init__(self) -> None:
        self.charges: dict[str, int] = {}
        self.answer: str | None = None  # force "unknown" or "raise"
        self.lookups: list[str] = []

    async def find(self, attempt: Attempt) -> Found | Absent | Unknown:
        self.lookups.append(attempt.idempotency_key)
        if self.answer == "unknown":
            return Unknown("provider timeout")
        if self.answer == "raise":
            raise RuntimeError("provider said 502")
        if attempt.idempotency_key in self.charges:
            return Found({"charged": self.charges[attempt.idempotency_key]}, "charge found by key")
        return Absent("no charge with this key")


def agent_for(provider: Provider, *, settle: float = 0.0, fail: bool = False) -> Agent:
    @tool(reconcile=provider.find, settle=settle)
    async def charge(amount: int, context: ToolContext) -> dict[str, int]:
        """Charge; with ``fail``, the provider takes it and the answer is lost."""
        provider.charges.setdefault(context.idempotency_key, amount)
        if fail:
            raise ToolOutcomeUnknown("connection reset after sending")
        return {"charged": amount}

    return Agent(model=ScriptedModel(SCRIPT), tools=[charge])


async def crashed_after_marker(
    journal: Journal,
    provider: Provider,
    *,
    charged: bool,
    owner: Owner | None = None,
    ttl: float = 15,
    release: bool = True,
) -> None:
    """The records a drive killed right after its marker leaves; ``charged``: the effect ran.
    The drive held a lease of ``ttl`` seconds as ``owner``: released (it halted), or left to
    run out."""
    agent = agent_for(provider)
    await agent.submit("r", "go", journal=journal)
    lease = await journal.store.acquire("r", owner or Owner.here(), ttl=ttl)
    await journal.store.append(
        "r", R.turn_key(1), R.TURN,
        {"n": 1, "turn": _turn(), "plan": {"c1": {"safety": "side_effect"}}, "epoch": lease.epoch},
        epoch=lease.epoch,
    )  # fmt: skip
    await journal.store.append(
        "r", R.attempt_key("c1", 1), R.ATTEMPT,
        {"call_id": "c1", "attempt": 1, "tool": "charge", "safety": "side_effect",
         "epoch": lease.epoch},
        epoch=lease.epoch,
    )  # fmt: skip
    if release:
        await journal.store.release(lease)
    if charged:
        from runtime.tools import idempotency_key_for

        provider.charges[idempotency_key_for("r", "c1")] = 5


def _turn() -> dict[str, Any]:
    from runtime.messages import AssistantTurn, ToolCall

    return AssistantTurn(
        tool_calls=(ToolCall("c1", "charge", {"amount": 5}),), finish_reason="tool_calls"
    ).to_json()


async def test_found_settles_a_crashed_attempt_on_resume_with_its_evidence(db_path: Path) -> None:
    provider = Provider()
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=True)
        done = await agent_for(provider).resume("r", journal=journal)
        assert done.status is RunStatus.COMPLETED
        state = await journal.require("r")
    result = state.calls["c1"].results[1].payload
    assert result["outcome"] == "value" and result["value"] == {"charged": 5}
    assert result["resolved"]["by"] == "reconciler find"
    assert result["resolved"]["evidence"] == "charge found by key"
    assert provider.charges == {provider.lookups[0]: 5}  # charged once: never attempted again


async def test_absent_after_the_owner_is_gone_and_the_settle_time_is_not_executed(
    db_path: Path,
) -> None:
    provider = Provider()
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=False)
        done = await agent_for(provider, settle=0).resume("r", journal=journal)
        assert done.status is RunStatus.COMPLETED
        state = await journal.require("r")
    c1 = state.calls["c1"]
    assert c1.results[1].payload["outcome"] == "not_executed"
    assert c1.results[1].payload["resolved"]["reconciler"] == "find"
    assert c1.results[2].payload["value"] == {"charged": 5}  # the second attempt charged
    assert len(provider.charges) == 1


async def test_absent_before_the_settle_time_stays_halted_and_says_when_it_tries_again(
    db_path: Path,
) -> None:
    provider = Provider()
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=False)
        halted = await agent_for(provider, settle=3600).resume("r", journal=journal)
        assert halted.status is RunStatus.HALTED
        assert "reconciling: find said absent: no charge with this key" in halted.halts[0].cause
        assert "settle time" in halted.halts[0].cause
        state = await journal.require("r")
    tried = state.calls["c1"].last_reconcile
    assert tried is not None and tried.payload["said"] == "absent"
    told = "\n".join(render(timeline(state)))
    assert "reconciling (next try in" in told and "find said absent" in told
    assert state.calls["c1"].result is None and provider.charges == {}


@pytest.mark.parametrize(("answer", "said"), [("unknown", "provider timeout"), ("raise", "502")])
async def test_unknown_and_a_raising_reconciler_leave_the_call_halted(
    db_path: Path, answer: str, said: str
) -> None:
    provider = Provider()
    provider.answer = answer
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=True)
        halted = await agent_for(provider, settle=0).resume("r", journal=journal)
        assert halted.status is RunStatus.HALTED
        assert said in halted.halts[0].cause and "said unknown" in halted.halts[0].cause
        # Outside the drive, the next try waits for its backoff unless asked now.
        assert await settle_run(journal, agent_for(provider).tools, "r") == []
        (tried,) = await settle_run(journal, agent_for(provider).tools, "r", now=True)
        assert tried[1].said == "unknown"


async def test_a_persons_earlier_resolution_stands_against_the_reconciler(db_path: Path) -> None:
    provider = Provider()
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=True)
        assert await journal.resolve("r", "c1", Resolution.failed("refunded"), by="alice")
        assert await settle_run(journal, agent_for(provider).tools, "r", now=True) == []
        state = await journal.require("r")
    assert state.calls["c1"].result is not None
    assert state.calls["c1"].result.payload["resolved"]["by"] == "alice"


async def test_the_drive_that_halts_settles_found_at_once_and_never_its_own_absent(
    db_path: Path,
) -> None:
    provider = Provider()
    async with Journal(db_path) as journal:
        # The provider took the charge and the answer was lost: the lookup finds it.
        done = await agent_for(provider, fail=True).run("found", "go", journal=journal)
        assert done.status is RunStatus.COMPLETED
        # Now it never reaches the provider: absent, but this drive owns the attempt, so it
        # halts; once it released the run (and the settle time passed) a worker settles it.
        lost = Provider()
        lost_agent = agent_for(lost, fail=True)
        lost.charges = _NeverStored()
        halted = await lost_agent.run("absent", "go", journal=journal)
        assert halted.status is RunStatus.HALTED
        assert "owner still holds the run" in halted.halts[0].cause
        (tried,) = await settle_run(journal, lost_agent.tools, "absent", now=True)
        assert tried[1].outcome == "not_executed"
        assert await journal.status("absent") == "orphaned"  # ready for a worker
    assert len(provider.charges) == 1


async def test_a_slow_absent_about_attempt_1_is_not_recorded_against_attempt_2(
    db_path: Path,
) -> None:
    """While one worker's reconciler is still looking attempt 1 up, another settles attempt 1
    "not executed" and a drive sends attempt 2, which halts. The slow "absent" judged attempt
    1: it is refused, not recorded as attempt 2's resolution, and no attempt 3 is sent."""
    sent: list[int] = []
    looked_up: list[int] = []
    meanwhile: list[Callable[[], Awaitable[None]]] = []

    async def find(attempt: Attempt) -> Found | Absent | Unknown:
        looked_up.append(attempt.attempt)
        if meanwhile:
            await meanwhile.pop()()
            return Absent("no charge with this key when it looked")
        return Unknown("provider busy")

    @tool(name="charge", reconcile=find, settle=0)
    async def charge(amount: int) -> dict[str, int]:
        sent.append(amount)
        raise ToolOutcomeUnknown("connection reset after sending")

    agent = Agent(model=ScriptedModel(SCRIPT), tools=[charge])
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, Provider(), charged=False)

        async def another_worker() -> None:
            assert await journal.resolve("r", "c1", Resolution.not_executed(), by="worker-2")
            assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED

        meanwhile.append(another_worker)
        assert await settle_run(journal, agent.tools, "r", now=True) == []
        assert looked_up[0] == 1 and sent == [5]  # attempt 2 was sent, and halted
        c1 = (await journal.require("r")).calls["c1"]
        assert (c1.attempt, sorted(c1.results)) == (2, [1])
        assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED
        assert sent == [5], "attempt 3 was sent on a verdict about attempt 1"


class _NeverStored(dict[str, int]):
    """A provider the charge never reaches."""

    def setdefault(self, key: str, default: int | None = None) -> int:
        return default or 0


def test_a_reconciler_belongs_to_an_async_lookup_of_a_side_effect() -> None:
    async def find(attempt: Attempt) -> Absent:
        return Absent("no")

    def not_async(attempt: Attempt) -> Absent:
        return Absent("no")

    with pytest.raises(ConfigError, match="only a SIDE_EFFECT"):

        @tool(safety=Safety.READ_ONLY, reconcile=find)
        async def read() -> None:
            """A read."""

    with pytest.raises(ConfigError, match="async function"):

        @tool(reconcile=not_async)
        async def charge() -> None:
            """A charge."""

    with pytest.raises(ConfigError, match="settle"):

        @tool(reconcile=find, settle=-1)
        async def charge2() -> None:
            """A charge."""


async def test_an_inconclusive_try_is_kept_after_the_run_ended(db_path: Path) -> None:
    provider = Provider()
    provider.answer = "unknown"
    async with Journal(db_path) as journal:
        await crashed_after_marker(journal, provider, charged=True)
        await journal.cancel("r", by="ops")
        await agent_for(provider).resume("r", journal=journal)  # ends it cancelled
        await settle_run(journal, agent_for(provider).tools, "r", now=True)
        state = await journal.require("r")
    assert state.end is not None and state.anomalies() == []
    assert state.calls["c1"].last_reconcile is not None
