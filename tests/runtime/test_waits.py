"""Durable waits in tools: sleeps and timers, signals into a waiting run (both backends)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from runtime import (
    Agent,
    ConfigError,
    ConflictError,
    Journal,
    RunStatus,
    Safety,
    SignalTimeout,
    ToolContext,
    Worker,
    tool,
)
from runtime.testing import MemoryStore, ScriptedModel
from tests.helpers import Ledger, call


def sleeper(ledger: Ledger, seconds: float, *, then: str = "slept") -> Agent:
    @tool(safety=Safety.IDEMPOTENT)
    async def nap(context: ToolContext) -> str:
        """Wait, then say so."""
        ledger.executions.append(("nap", {}, None))
        await context.sleep(seconds)
        ledger.executions.append(("woke", {}, None))
        return then

    script = [{"tool_calls": [call("c1", "nap")]}, {"text": "done"}]
    return Agent(model=ScriptedModel(script), tools=[nap])


def receiver(ledger: Ledger, *, receives: int = 1, timeout: float | None = None) -> Agent:
    @tool(safety=Safety.READ_ONLY)
    async def listen(context: ToolContext) -> list[Any]:
        """Take signals named "go"."""
        got = []
        for _ in range(receives):
            try:
                got.append(await context.receive("go", timeout=timeout, expect=int))
            except SignalTimeout:
                got.append("timed out")
        ledger.executions.append(("listen", {"got": got}, None))
        return got

    script = [{"tool_calls": [call("c1", "listen")]}, {"text": "done"}]
    return Agent(model=ScriptedModel(script), tools=[listen])


async def test_a_sleep_stops_the_run_waiting_on_a_timer_and_a_resume_before_it_is_due_waits_again(
    journal: Journal,
) -> None:
    ledger = Ledger()
    agent = sleeper(ledger, 60)
    first = await agent.run("r", "nap", journal=journal)
    assert first.status is RunStatus.WAITING
    (waiting,) = first.waiting
    assert (waiting.kind, waiting.tool) == ("timer", "nap")
    now = await journal.store.clock_ms()
    assert waiting.due_ms is not None and 59_000 < waiting.due_ms - now <= 60_000
    row = await journal.store.run_row("r")
    assert row is not None and row.status == "waiting"
    assert row.detail["waiting"][0]["due_ms"] == waiting.due_ms
    assert "r" not in dict(await journal.store.claimable())

    again = await agent.resume("r", journal=journal)  # too early: the same timer, not a new one
    assert again.status is RunStatus.WAITING and again.waiting[0].due_ms == waiting.due_ms
    assert ledger.count("woke") == 0
    records = [r.key for r in (await journal.require("r")).records]
    assert records.count("wait/c1/1") == 1


async def test_a_sleep_whose_time_came_returns_and_the_run_goes_on(journal: Journal) -> None:
    ledger = Ledger()
    agent = sleeper(ledger, 0.3)
    assert (await agent.run("r", "nap", journal=journal)).status is RunStatus.WAITING
    await asyncio.sleep(0.4)
    assert "r" in dict(await journal.store.claimable())  # due: a worker would claim it
    done = await agent.resume("r", journal=journal)
    assert (done.status, done.output) == (RunStatus.COMPLETED, "done")
    assert (ledger.count("nap"), ledger.count("woke")) == (2, 1)


async def test_a_worker_drives_a_sleeping_run_once_it_is_due(journal: Journal) -> None:
    ledger = Ledger()
    agent = sleeper(ledger, 0.5)
    assert (await agent.run("r", "nap", journal=journal)).status is RunStatus.WAITING
    async with Worker(journal, agent=agent, poll=0.1):
        for _ in range(100):
            row = await journal.store.run_row("r")
            if row is not None and row.status == "completed":
                break
            await asyncio.sleep(0.05)
    assert row is not None and row.status == "completed"
    assert ledger.count("woke") == 1


async def test_sleep_until_takes_an_aware_time_and_a_time_past_does_not_wait(
    journal: Journal,
) -> None:
    seen: list[str] = []

    @tool(safety=Safety.READ_ONLY)
    async def until(when: str, context: ToolContext) -> str:
        """Wait until a time."""
        moment = dt.datetime.fromisoformat(when)
        await context.sleep_until(moment)
        seen.append(when)
        return "ok"

    past = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat()
    naive = dt.datetime.now().replace(tzinfo=None).isoformat()
    script = [
        {"tool_calls": [call("c1", "until", when=past)]},
        {"tool_calls": [call("c2", "until", when=naive)]},
        {"text": "done"},
    ]
    agent = Agent(model=ScriptedModel(script), tools=[until])
    with pytest.raises(ConfigError, match=r"sleep_until\(\) takes a datetime with a time zone"):
        await agent.run("r", "go", journal=journal)
    assert seen == [past]


@pytest.mark.parametrize("seconds", [-1, float("nan"), 10**9, True, "5"])
async def test_a_sleep_of_a_wrong_length_is_refused_naming_it(
    journal: Journal, seconds: Any
) -> None:
    agent = sleeper(Ledger(), seconds)
    with pytest.raises(ConfigError) as caught:
        await agent.run("r", "nap", journal=journal)
    assert str(caught.value) == (
        f"sleep() is a number of seconds from 0 to 31622400, not {seconds!r}"
    )


async def test_a_side_effect_may_not_sleep(journal: Journal) -> None:
    @tool
    async def charge(context: ToolContext) -> str:
        """A side effect that would run again after its wait."""
        await context.sleep(1)
        return "charged"

    agent = Agent(model=ScriptedModel([{"tool_calls": [call("c1", "charge")]}]), tools=[charge])
    with pytest.raises(ConfigError, match=r"SIDE_EFFECT and called sleep\(\)"):
        await agent.run("r", "go", journal=journal)


async def test_a_signal_sent_before_the_receive_waits_in_the_mailbox(journal: Journal) -> None:
    ledger = Ledger()
    agent = receiver(ledger)
    await journal.store.create_run("r")  # the run exists before its first drive
    assert await journal.signal("r", "go", 7)
    result = await agent.run("r", "listen", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert ledger.executions == [("listen", {"got": [7]}, None)]


async def test_a_signal_sent_after_the_receive_wakes_the_run_and_is_taken_once(
    journal: Journal,
) -> None:
    ledger = Ledger()
    agent = receiver(ledger, receives=2)
    first = await agent.run("r", "listen", journal=journal)
    assert first.status is RunStatus.WAITING
    (waiting,) = first.waiting
    assert (waiting.kind, waiting.name, waiting.due_ms) == ("signal", "go", None)
    assert "r" not in dict(await journal.store.claimable())
    assert await journal.signal("r", "go", 1, signal_id="first")
    assert "r" in dict(await journal.store.claimable())
    second = await agent.resume("r", journal=journal)
    assert second.status is RunStatus.WAITING  # the second receive waits for its own
    assert await journal.signal("r", "go", 2)
    assert not await journal.signal("r", "go", 1, signal_id="first")  # sent again: one signal
    done = await agent.resume("r", journal=journal)
    assert done.status is RunStatus.COMPLETED
    assert ledger.executions[-1] == ("listen", {"got": [1, 2]}, None)
    state = await journal.require("r")
    given = [r.payload["signal"] for r in state.records if r.kind == "received"]
    assert len(given) == len(set(given)) == 2


async def test_signals_are_taken_in_the_order_they_were_sent(journal: Journal) -> None:
    ledger = Ledger()
    agent = receiver(ledger, receives=3)
    await journal.store.create_run("r")
    for value in (3, 1, 2):
        await journal.signal("r", "go", value)
    assert (await agent.run("r", "listen", journal=journal)).status is RunStatus.COMPLETED
    assert ledger.executions == [("listen", {"got": [3, 1, 2]}, None)]


async def test_a_receive_that_times_out_says_so_durably_and_a_later_signal_waits_for_the_next(
    journal: Journal,
) -> None:
    ledger = Ledger()
    agent = receiver(ledger, receives=2, timeout=0.3)
    first = await agent.run("r", "listen", journal=journal)
    assert first.status is RunStatus.WAITING and first.waiting[0].due_ms is not None
    await asyncio.sleep(0.4)
    assert "r" in dict(await journal.store.claimable())  # its timeout is due
    second = await agent.resume("r", journal=journal)  # the first receive times out
    assert second.status is RunStatus.WAITING
    await journal.signal("r", "go", 5)
    done = await agent.resume("r", journal=journal)
    assert done.status is RunStatus.COMPLETED
    # The tool ran again from its start: the first receive's timeout stood, the signal went
    # to the second.
    assert ledger.executions[-1] == ("listen", {"got": ["timed out", 5]}, None)


async def test_a_signal_is_checked_before_it_is_journaled(journal: Journal) -> None:
    agent = receiver(Ledger())
    await agent.run("r", "listen", journal=journal)
    await journal.signal("r", "go", 1, signal_id="s1")
    with pytest.raises(ConflictError, match="sent already with a different value"):
        await journal.signal("r", "go", 2, signal_id="s1")
    for name in ("", "a/b", "x" * 129, "nul\x00"):
        with pytest.raises(ConfigError, match="signal name is 1 to 128 characters"):
            await journal.signal("r", name, 1)
    with pytest.raises(ConfigError, match="signal id is 1 to 128 characters"):
        await journal.signal("r", "go", 1, signal_id="a/b")
    with pytest.raises(ConfigError, match="no run 'nope'"):
        await journal.signal("nope", "go", 1)
    await journal.cancel("r")
    await agent.resume("r", journal=journal)  # ends cancelled
    with pytest.raises(ConfigError, match="run 'r' has ended; nothing more is recorded"):
        await journal.signal("r", "go", 1)


async def test_a_signal_of_the_wrong_type_fails_the_call_and_is_not_taken_twice(
    journal: Journal,
) -> None:
    agent = receiver(Ledger())
    await agent.run("r", "listen", journal=journal)
    await journal.signal("r", "go", "not a number")
    result = await agent.resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    state = await journal.require("r")
    outcome = state.calls["c1"].result
    assert outcome is not None and "does not fit what was expected" in str(outcome.payload)


async def test_a_worker_drives_a_run_its_signal_woke(journal: Journal) -> None:
    ledger = Ledger()
    agent = receiver(ledger)
    assert (await agent.run("r", "listen", journal=journal)).status is RunStatus.WAITING
    async with Worker(journal, agent=agent, poll=0.1):
        await asyncio.sleep(0.2)
        assert ledger.count("listen") == 0  # nothing to do until the signal
        await journal.signal("r", "go", 9)
        for _ in range(100):
            row = await journal.store.run_row("r")
            if row is not None and row.status == "completed":
                break
            await asyncio.sleep(0.05)
    assert ledger.executions == [("listen", {"got": [9]}, None)]


async def test_a_cancelled_sleeping_run_is_not_woken_by_its_timer(journal: Journal) -> None:
    ledger = Ledger()
    agent = sleeper(ledger, 0.2)
    assert (await agent.run("r", "nap", journal=journal)).status is RunStatus.WAITING
    await journal.cancel("r", reason="no longer needed")
    await asyncio.sleep(0.3)
    assert "r" not in dict(await journal.store.claimable())  # due, but cancelled
    ended = await agent.resume("r", journal=journal)
    assert ended.status is RunStatus.CANCELLED
    assert ledger.count("woke") == 0


async def test_two_calls_of_one_turn_receiving_one_name_take_one_signal_each(
    journal: Journal,
) -> None:
    got: dict[str, Any] = {}

    @tool(safety=Safety.READ_ONLY)
    async def take(who: str, context: ToolContext) -> Any:
        """Take a signal."""
        got[who] = await context.receive("go", expect=int)
        return got[who]

    script = [{"tool_calls": [call("c1", "take", who="a"), call("c2", "take", who="b")]}]
    agent = Agent(model=ScriptedModel([*script, {"text": "done"}]), tools=[take])
    await journal.store.create_run("r")
    await journal.signal("r", "go", 1)
    await journal.signal("r", "go", 2)
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.COMPLETED
    assert sorted(got.values()) == [1, 2]


class _AnsweredMeanwhile(MemoryStore):
    """A person answers while the drive that asked is still writing "waiting"."""

    answered = False

    async def update_index(self, run_id: str, **fields: Any) -> None:
        if fields.get("status") == "waiting" and not self.answered:
            self.answered = True
            payload = {"call_id": "c1", "key": "price", "value": 3, "by": "p"}
            await self.append(run_id, "answer/c1/price", "answer", payload, unless="end")
        await super().update_index(run_id, **fields)


async def test_an_answer_committed_while_the_drive_writes_waiting_still_wakes_the_run() -> None:
    """The drive names the seq through which it saw its run: an answer committed after that,
    before its "waiting" lands, wakes the run (with the status write's own seq it would not,
    and no worker would ever claim it)."""

    @tool(safety=Safety.READ_ONLY)
    async def quote(context: ToolContext) -> int:
        """Ask a price."""
        return int(await context.interrupt("price", "What price?", expect=int))

    agent = Agent(model=ScriptedModel([{"tool_calls": [call("c1", "quote")]}]), tools=[quote])
    async with Journal(store=_AnsweredMeanwhile()) as journal:
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.WAITING
        row = await journal.store.run_row("r")
        assert row is not None and row.status == "waiting"
        assert "r" in dict(await journal.store.claimable())
