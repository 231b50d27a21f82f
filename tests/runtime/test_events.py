"""A run's events: typed, from the journal then live, resumable from any cursor with no loss and
no duplicate, from this process or another (SQLite by polling, PostgreSQL by LISTEN/NOTIFY)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

import pytest

from runtime import Agent, Journal, Resolution, Safety, single_approval, tool
from runtime.errors import ConfigError
from runtime.events import (
    AttemptMarked,
    Ended,
    Event,
    Halted,
    Resolved,
    RunStarted,
    TextDelta,
    ToolCallAsked,
    ToolResult,
    TurnRecorded,
    TurnStarted,
    Waiting,
)
from runtime.testing import ScriptedModel
from tests.conftest import ROOT, child_env
from tests.runtime.events_helpers import key, slow_agent


async def _all(journal: Journal, run_id: str, after: int | str = 0) -> list[Event]:
    return [e async for e in journal.events(run_id, after=after, live=False)]


async def test_stream_yields_typed_events_in_order_then_the_result(journal: Journal) -> None:
    agent = slow_agent(2, step_s=0)
    stream = agent.stream("s-1", "go", journal=journal)
    seen = [e async for e in stream]
    assert stream.result is not None and stream.result.status.value == "completed"
    journaled = [e for e in seen if not e.live]
    assert [e.type for e in journaled] == [
        "run_started",
        *["turn", "tool_call", "result"] * 2,
        "turn",
        "end",
    ]
    assert isinstance(journaled[0], RunStarted) and journaled[0].input == "go"
    assert isinstance(journaled[-1], Ended) and journaled[-1].output == "all steps done"
    # Live events: each turn started, then its text word by word, before its record.
    turn3 = seen.index(next(e for e in seen if isinstance(e, TurnRecorded) and e.n == 3))
    started = seen.index(next(e for e in seen if isinstance(e, TurnStarted) and e.n == 3))
    deltas = [e for e in seen[started:turn3] if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "all steps done"
    assert all(e.cursor is None for e in seen if e.live)
    # The journal, read afterwards, holds the same journaled events with the same cursors.
    assert [key(e) for e in await _all(journal, "s-1")] == [key(e) for e in journaled]


async def test_every_cursor_resumes_exactly_after_its_event(journal: Journal) -> None:
    await slow_agent(3, step_s=0).run("r-1", "go", journal=journal)
    events = await _all(journal, "r-1")
    cursors = [e.cursor for e in events]
    assert len(set(cursors)) == len(cursors)  # every event its own position
    assert any(c is not None and "." in c for c in cursors)  # a turn gives several events
    for i, event in enumerate(events):
        assert event.cursor is not None
        after = [key(e) for e in await _all(journal, "r-1", after=event.cursor)]
        assert after == [key(e) for e in events[i + 1 :]], event.cursor


async def test_a_bad_cursor_or_run_is_refused_by_name(journal: Journal) -> None:
    await slow_agent(1, step_s=0).run("b-1", "go", journal=journal)
    for bad in (-1, "x", "1.", "1.2.3", True, "\uff11"):
        with pytest.raises(ConfigError, match="cursor"):
            await _all(journal, "b-1", after=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no run 'nope'"):
        await _all(journal, "nope")


async def test_a_slow_follower_never_holds_the_drive_back_and_misses_nothing(
    journal: Journal,
) -> None:
    """The follower reads one event per 20 ms; the drive of 30 steps finishes long before it
    has read them, and it then reads every journaled event once, from the journal."""
    agent = slow_agent(30, step_s=0)
    drive = asyncio.create_task(agent.run("slow-1", "go", journal=journal))
    while not await journal.store.check_run("slow-1"):
        await asyncio.sleep(0.001)
    seen: list[Event] = []
    finished_at = None
    async for event in journal.events("slow-1", idle=30):
        seen.append(event)
        if drive.done() and finished_at is None:
            finished_at = len([e for e in seen if not e.live])
        await asyncio.sleep(0.02)
    assert (await drive).status.value == "completed"
    journaled = [key(e) for e in seen if not e.live]
    assert journaled == [key(e) for e in await _all(journal, "slow-1")]
    assert finished_at is not None and finished_at < len(journaled) / 2


async def test_a_halt_then_its_resolution_reach_a_follower_live(journal: Journal) -> None:
    call = {"id": "c1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "done"}])

    @tool(name="charge", safety=Safety.SIDE_EFFECT)
    async def lost(customer: str, amount: int) -> Any:
        """Charge, and lose the answer."""
        raise TimeoutError("the provider went quiet")

    agent = Agent(model=model, tools=[lost], name="halting")
    seen: list[Event] = []

    async def watch() -> None:
        async for event in journal.events("h-1", idle=30):
            seen.append(event)

    first = await agent.run("h-1", "charge ann", journal=journal)
    assert first.status.value == "halted"
    follower = asyncio.create_task(watch())
    while not any(isinstance(e, Halted) for e in seen):
        await asyncio.sleep(0.01)
    await journal.resolve("h-1", "c1", Resolution.succeeded({"id": "ch_1"}), by="alice")
    while not any(isinstance(e, Resolved) for e in seen):
        await asyncio.sleep(0.01)
    resumed = await agent.resume("h-1", journal=journal)
    assert resumed.status.value == "completed"
    await asyncio.wait_for(follower, 10)
    types = [e.type for e in seen if not e.live]
    assert types[:5] == ["run_started", "turn", "tool_call", "attempt", "halt"]
    assert types[-2:] == ["turn", "end"]
    resolved = next(e for e in seen if isinstance(e, Resolved))
    assert resolved.by == "alice" and resolved.value == {"id": "ch_1"}
    assert any(isinstance(e, AttemptMarked) for e in seen)
    assert not any(isinstance(e, ToolResult) for e in seen)


async def test_a_gated_call_says_it_waits(journal: Journal) -> None:
    @tool(approval=single_approval())
    async def send(to: str) -> str:
        """Send it."""
        return "sent"

    call = {"id": "g1", "name": "send", "arguments": {"to": "bob"}}
    agent = Agent(model=ScriptedModel([{"tool_calls": [call]}, {"text": "ok"}]), tools=[send])
    result = await agent.run("g-1", "send", journal=journal)
    assert result.status.value == "waiting"
    events = await _all(journal, "g-1")
    asked = next(e for e in events if isinstance(e, ToolCallAsked))
    assert asked.gated and asked.tool == "send"
    waiting = next(e for e in events if isinstance(e, Waiting))
    assert (waiting.call_id, waiting.kind) == ("g1", "approval")


def _follower(journal_url: str, run_id: str, after: str) -> list[str]:
    return [sys.executable, "-m", "tests.runtime.events_helpers", journal_url, run_id, after]


async def _spawn(url: str, run_id: str, after: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *_follower(url, run_id, after),
        cwd=ROOT,
        env=child_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _lines(process: asyncio.subprocess.Process, *, until: int | None = None) -> list[Any]:
    assert process.stdout is not None
    lines: list[Any] = []
    while until is None or len(lines) < until:
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        if not line:
            break
        lines.append(json.loads(line))
    return lines


def _url(journal: Journal) -> str:
    return str(journal.url)


async def test_a_follower_killed_mid_stream_resumes_from_its_cursor_exactly_once(
    journal: Journal,
) -> None:
    """Another process follows a 60-step run; it is SIGKILLed after 20 events, and a new one
    started with the last cursor it printed: together they print every journaled event once.
    The run waits at step 10 until the first follower is dead, so the second one follows it
    live."""
    gate = asyncio.Event()
    agent = slow_agent(40, gate=gate, gate_at=10)
    drive = asyncio.create_task(agent.run("k-1", "go", journal=journal))
    while not await journal.store.check_run("k-1"):
        await asyncio.sleep(0.005)
    first = await _spawn(_url(journal), "k-1", "0")
    got = await _lines(first, until=20)
    first.send_signal(signal.SIGKILL)
    await first.wait()
    assert not drive.done()
    gate.set()
    second = await _spawn(_url(journal), "k-1", got[-1]["cursor"])
    got += await _lines(second)
    assert await second.wait() == 0, await second.stderr.read()  # type: ignore[union-attr]
    await drive
    expected = [list(key(e)) for e in await _all(journal, "k-1")]
    assert [[g["cursor"], g["type"], g["call_id"]] for g in got] == expected


async def test_two_followers_in_two_processes_see_the_same_order(journal: Journal) -> None:
    agent = slow_agent(30)
    drive = asyncio.create_task(agent.run("o-1", "go", journal=journal))
    while not await journal.store.check_run("o-1"):
        await asyncio.sleep(0.005)
    a, b = await _spawn(_url(journal), "o-1", "0"), await _spawn(_url(journal), "o-1", "0")
    seen_a, seen_b = await asyncio.gather(_lines(a), _lines(b))
    assert await a.wait() == 0 and await b.wait() == 0
    await drive
    expected = [list(key(e)) for e in await _all(journal, "o-1")]
    told = [[[g["cursor"], g["type"], g["call_id"]] for g in seen] for seen in (seen_a, seen_b)]
    assert told == [expected, expected]
    assert len(expected) > 90


async def test_on_postgresql_a_commit_of_another_process_wakes_a_follower_by_notify(
    journal: Journal, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follower's safety-net poll is pushed out of reach: only the commit's NOTIFY can
    tell it of the cancel another journal (another connection pool, no shared hub) writes."""
    if backend != "postgres":
        pytest.skip("SQLite has no notifications: its followers poll (tested above)")
    from runtime.events import hub, live

    monkeypatch.setattr(live, "POLL_LISTENING", 600.0)
    gate = asyncio.Event()
    drive = asyncio.create_task(
        slow_agent(3, gate=gate, gate_at=1).run("n-1", "go", journal=journal)
    )
    seen: list[Event] = []

    async def watch() -> None:
        async for event in journal.events("n-1", idle=60):
            seen.append(event)
            if event.type == "cancel":
                return

    while not await journal.store.check_run("n-1"):
        await asyncio.sleep(0.01)
    follower = asyncio.create_task(watch())
    while not hub.hub_of(journal.store).listens or not seen:
        await asyncio.sleep(0.01)
    async with Journal(str(journal.url)) as other:
        await _listening(str(journal.url))
        await other.cancel("n-1", by="bob")
    await asyncio.wait_for(follower, 30)
    assert seen[-1].type == "cancel"
    gate.set()
    assert (await drive).status.value == "cancelled"


async def _listening(url: str) -> None:
    """Until the follower's listening connection is up (then its LISTEN follows at once)."""
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for _ in range(500):
            query = (
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bide-listen' "
                "AND datname = current_database()"
            )
            if await conn.fetchval(query):
                await asyncio.sleep(0.2)
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the follower never connected to listen")
    finally:
        await conn.close()
