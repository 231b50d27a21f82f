"""When a reconciler's *absent* may settle a halted side effect: only after a settle time the
tool declared, counted from the end of the lease under which the attempt was sent, on the
journal's clock (PostgreSQL's, or this boot's for SQLite), never a process's wall clock."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime import Agent, Journal, Owner, RunStatus, ToolContext, tool
from runtime.reconcile import Absent, Attempt, settle_run, settles_at_ms
from runtime.testing import ScriptedModel
from tests.helpers import call
from tests.runtime.test_reconcile import Provider, crashed_after_marker

SCRIPT = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]


@pytest.fixture(params=["sqlite", "postgres"])
async def journal(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Journal]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else db_path
    async with Journal(url) as j:
        yield j


async def nobody_found(attempt: Attempt) -> Absent:
    return Absent("no charge with this key")


def charging(**declared: Any) -> Agent:
    @tool(reconcile=nobody_found, **declared)
    async def charge(amount: int, context: ToolContext) -> dict[str, int]:
        return {"charged": amount}

    return Agent(model=ScriptedModel(SCRIPT), tools=[charge])


async def attempted(journal: Journal, *, ttl: float, release: bool) -> None:
    """A run whose charge was marked under a lease of ``ttl`` seconds held by a driver on
    another host (never known to be gone): released (it halted), or left to run out."""
    far = dataclasses.replace(Owner.here(), host="another-host")
    await crashed_after_marker(
        journal, Provider(), charged=False, owner=far, ttl=ttl, release=release
    )


async def test_without_a_declared_settle_time_absent_leaves_the_halt_for_a_person(
    journal: Journal,
) -> None:
    """A timeout (1 s) is how long bide waits, not how long the provider may take: it is no
    settle time. With none declared, absent never settles, however late it is asked."""
    await attempted(journal, ttl=15, release=True)
    agent = charging(timeout=1)
    (tried,) = await settle_run(journal, agent.tools, "r", now=True)
    verdict = tried[1]
    assert (verdict.said, verdict.outcome) == ("absent", None)
    assert "declares no settle time" in (verdict.waiting or "")
    assert await journal.status("r") == "halted"
    halted = await agent.resume("r", journal=journal)
    assert halted.status is RunStatus.HALTED and "declares no settle time" in halted.halts[0].cause
    assert (await journal.require("r")).calls["c1"].result is None


async def test_the_settle_time_counts_from_the_end_of_the_lease_not_the_marker(
    journal: Journal,
) -> None:
    """The driver may send until its lease ends: a settle time of 1 s, for a lease of 1.5 s
    that ran out (its owner stalled or died on another host), settles at 2.5 s, not at 1 s."""
    await attempted(journal, ttl=1.5, release=False)
    agent = charging(settle=1)
    lease = await journal.lease("r")
    assert lease is not None
    await asyncio.sleep(1.6)  # the lease ran out; the marker is 1.6 s old, its settle time 1 s
    (early,) = await settle_run(journal, agent.tools, "r", now=True)
    assert early[1].outcome is None and "settle time" in (early[1].waiting or "")
    assert (early[1].next_try_ms or 0) >= settles_at_ms(lease.end_ms, 1)
    while await journal.store.clock_ms() < settles_at_ms(lease.end_ms, 1):
        await asyncio.sleep(0.05)
    (settled,) = await settle_run(journal, agent.tools, "r", now=True)
    assert settled[1].outcome == "not_executed"


async def test_the_settle_time_is_judged_on_the_journals_clock_not_this_processs(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process's wall clock runs two minutes fast: a settle time of 60 s from a lease that
    ended just now has not passed, whatever that clock says."""
    await attempted(journal, ttl=15, release=True)
    agent = charging(settle=60)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + 120 * 10**9)
    monkeypatch.setattr(time, "time", lambda: real() / 1e9 + 120)
    (tried,) = await settle_run(journal, agent.tools, "r", now=True)
    assert tried[1].outcome is None and "settle time" in (tried[1].waiting or "")
    assert (await journal.require("r")).calls["c1"].result is None
