"""Waking workers on PostgreSQL: a write that makes a run ready NOTIFYs in its own transaction,
a Worker LISTENs on a connection of its own and claims at once, and a lost listener is logged,
reconnected, and wakes the worker again. Polling stays the fallback (a 30 s poll here, so
every pickup below happens before a poll could have)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runtime import Agent, Journal, RunStatus, Worker, single_approval, tool
from runtime.store.postgres.listen import APPLICATION_NAME
from runtime.store.protocol import Wakeups
from runtime.testing import ScriptedModel
from tests.helpers import call
from tests.postgres.test_workers import rows

POLL = 30.0
"""Longer than any of these tests: a run picked up at all was picked up by a wake-up."""

ANSWER = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]


def charging(charged: list[int], *, gated: bool = False) -> Agent:
    @tool(approval=single_approval() if gated else None)
    async def charge(amount: int) -> dict[str, int]:
        """A side effect, counted."""
        charged.append(amount)
        return {"charged": amount}

    return Agent(model=ScriptedModel(ANSWER), tools=[charge])


async def next_heard(wakes: AsyncIterator[str | None]) -> str | None:
    async with asyncio.timeout(10):
        return await anext(wakes)


def logged(caplog: pytest.LogCaptureFixture, event: str, **fields: str) -> bool:
    for record in caplog.records:
        text = record.getMessage()
        if text.split(" ", 1)[0] == event and all(f"{k}={v!r}" in text for k, v in fields.items()):
            return True
    return False


async def until(what: str, check: Callable[[], Any], *, within: float) -> None:
    try:
        async with asyncio.timeout(within):
            while not await check():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {within:g} s") from None


async def test_only_writes_that_make_a_run_ready_are_heard_once_committed(pg_url: str) -> None:
    """Submitting and approving are heard, by another journal on the database; a drive's own
    writes under its lease, and a drive that stops waiting, are not."""
    agent = charging([], gated=True)
    async with Journal(pg_url) as listening, Journal(pg_url) as writing:
        assert isinstance(listening.store, Wakeups)
        wakes = listening.store.wakeups()
        try:
            assert await next_heard(wakes) is None  # connected: look now
            await agent.submit("r1", "go", journal=writing)
            assert await next_heard(wakes) == "r1"
            result = await agent.run("r2", "go", journal=writing)
            assert result.status is RunStatus.WAITING
            await writing.approve("r2", "c1", by="alice")
            assert await next_heard(wakes) == "r2"  # the approval, not the drive before it
            await agent.submit("r3", "go", journal=writing)
            assert await next_heard(wakes) == "r3"
        finally:
            await wakes.aclose()  # type: ignore[attr-defined]


async def test_a_worker_claims_a_submitted_run_when_told_not_at_its_next_poll(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runtime")
    charged: list[int] = []
    agent = charging(charged)
    async with Journal(pg_url) as journal, Journal(pg_url) as other:
        started = time.monotonic()
        async with Worker(journal, agent=agent, poll=POLL) as worker:
            await until("listening", lambda: _true(logged(caplog, "journal_listening")), within=10)
            await agent.submit("r", "go", journal=other)
            await until("completed", lambda: _is(other, "r", "completed"), within=20)
            assert time.monotonic() - started < POLL  # no poll can have fired yet
        assert worker.finished == {"r": "completed"}
    assert logged(caplog, "worker_woken", run_id="r")
    assert charged == [5]


async def test_a_killed_listening_connection_is_logged_and_made_again_and_still_wakes(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runtime")
    charged: list[int] = []
    agent = charging(charged)
    query = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        f"AND application_name = '{APPLICATION_NAME}'"
    )
    async with Journal(pg_url) as journal, Journal(pg_url) as other:
        started = time.monotonic()
        async with Worker(journal, agent=agent, poll=POLL) as worker:
            await until("listening", lambda: _true(logged(caplog, "journal_listening")), within=10)
            ((pid,),) = rows(pg_url, query)
            assert rows(pg_url, f"SELECT pg_terminate_backend({pid})") == [(True,)]
            await until(
                "listening again",
                lambda: _true(logged(caplog, "journal_listen_restored")),
                within=10,
            )
            assert logged(caplog, "journal_listen_lost")
            ((again,),) = rows(pg_url, query)
            assert again != pid
            await agent.submit("r", "go", journal=other)
            await until("completed", lambda: _is(other, "r", "completed"), within=20)
            assert time.monotonic() - started < POLL
        assert worker.finished == {"r": "completed"}
    assert logged(caplog, "worker_woken", run_id="r")
    lost = next(r for r in caplog.records if r.getMessage().startswith("journal_listen_lost"))
    assert lost.levelno == logging.WARNING
    assert "127.0.0.1" in lost.getMessage()  # names the server
    assert charged == [5]


async def _true(value: bool) -> bool:
    return value


async def _is(journal: Journal, run_id: str, status: str) -> bool:
    return await journal.status(run_id) == status
