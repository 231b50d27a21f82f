"""The queue contract (``runtime.store.queues``) on every store: the claim rule for limits,
decided with the lease grant; dedup keys; debounce; priorities; schedules' rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import ConfigError, QueueFull, RunBusy
from runtime.ownership import Owner
from runtime.store.memory import MemoryStore
from runtime.store.postgres.store import PostgresStore
from runtime.store.queues import QueueLimits, Queues, Room, admit
from runtime.store.sqlite.store import SQLiteStore

Store = SQLiteStore | MemoryStore | PostgresStore


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Store]:
    s: Store
    if request.param == "sqlite":
        s = await SQLiteStore.open(db_path)
    elif request.param == "postgres":
        s = await PostgresStore.open(request.getfixturevalue("pg_url"))
    else:
        s = MemoryStore()
    try:
        yield s
    finally:
        await s.close()


async def submitted(store: Store, run_id: str, queue: str, **options: object) -> str:
    """A run placed in ``queue`` and made ready as ``submit`` makes it."""
    holder = await store.enqueue(run_id, queue, **options)  # type: ignore[arg-type]
    if holder == run_id:
        await store.create_run(run_id)
        await store.update_index(run_id, status="submitted")
    return holder


async def end(store: Store, run_id: str) -> None:
    await store.append(run_id, "end", "end", {"status": "completed"}, index={"status": "completed"})


def test_the_rule_alone() -> None:
    limits = QueueLimits(concurrency=2, key_concurrency=1)
    assert admit(Room(None), "a") is None
    assert admit(Room(limits, active=1, by_key={"a": 1}), "b") is None
    assert "key 'a'" in (admit(Room(limits, active=1, by_key={"a": 1}), "a") or "")
    assert "concurrency is 2" in (admit(Room(limits, active=2), None) or "")
    rated = QueueLimits(rate=3, period=1.0)
    assert "rate" in (admit(Room(rated, recent=3), None) or "")


def test_limits_are_validated() -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        QueueLimits(concurrency=0)
    with pytest.raises(ConfigError, match="both rate"):
        QueueLimits(rate=3)
    with pytest.raises(ConfigError, match="period"):
        QueueLimits(rate=3, period=-1)


async def test_every_store_keeps_queues(store: Store) -> None:
    assert isinstance(store, Queues)


async def test_a_key_at_its_limit_refuses_the_claim_until_its_run_ends(store: Store) -> None:
    await store.set_limits("pay", QueueLimits(key_concurrency=1))
    await submitted(store, "a1", "pay", key="ann")
    await submitted(store, "a2", "pay", key="ann")
    await submitted(store, "b1", "pay", key="bob")
    assert await store.candidates(limit=10) == ["a1", "b1"]
    me = Owner.here(worker="w")
    first = await store.claim("a1", me, ttl=30)
    with pytest.raises(QueueFull, match="key 'ann' has 1 active"):
        await store.claim("a2", me, ttl=30)
    await store.claim("b1", me, ttl=30)
    # Released but not ended (waiting, say): it keeps its place.
    await store.release(first)
    with pytest.raises(QueueFull):
        await store.claim("a2", me, ttl=30)
    # Started once: taken again whatever the limits.
    again = await store.claim("a1", me, ttl=30)
    await end(store, "a1")
    await store.release(again)
    await store.claim("a2", me, ttl=30)
    [info] = await store.queues()
    assert (info.name, info.active, info.waiting) == ("pay", 2, 0)


async def test_queue_concurrency_and_priority(store: Store) -> None:
    await store.set_limits("q", QueueLimits(concurrency=1))
    await submitted(store, "low", "q", priority=0)
    await submitted(store, "high", "q", priority=5)
    assert await store.candidates(limit=10) == ["high"]
    await store.claim("high", Owner.here(), ttl=30)
    with pytest.raises(QueueFull, match="concurrency is 1"):
        await store.claim("low", Owner.here(), ttl=30)
    assert await store.candidates(limit=10) == []


async def test_a_rate_limit_counts_runs_started_in_its_period(store: Store) -> None:
    await store.set_limits("r", QueueLimits(rate=2, period=0.5))
    for n in range(3):
        await submitted(store, f"r{n}", "r")
    await store.claim("r0", Owner.here(), ttl=30)
    await store.claim("r1", Owner.here(), ttl=30)
    with pytest.raises(QueueFull, match="rate"):
        await store.claim("r2", Owner.here(), ttl=30)
    await asyncio.sleep(0.6)
    await store.claim("r2", Owner.here(), ttl=30)


async def test_a_queued_run_is_not_claimable_before_it_starts(store: Store) -> None:
    await submitted(store, "q1", "q")
    await store.create_run("plain")
    await store.update_index("plain", status="submitted")
    assert [r for r, _ in await store.claimable(limit=10)] == ["plain"]
    await store.claim("q1", Owner.here(), ttl=0.05)
    await asyncio.sleep(0.1)  # its lease ran out: an orphan, claimable as any other
    assert {r for r, _ in await store.claimable(limit=10)} == {"plain", "q1"}


async def test_a_busy_run_is_refused_as_busy(store: Store) -> None:
    await submitted(store, "x", "q")
    await store.claim("x", Owner.here(worker="one"), ttl=30)
    with pytest.raises(RunBusy):
        await store.claim("x", Owner.here(worker="two"), ttl=30)


async def test_a_dedup_key_holds_until_its_run_ends(store: Store) -> None:
    holders = await asyncio.gather(
        *(submitted(store, f"d{n}", "q", dedup_key="order-7") for n in range(10))
    )
    assert len(set(holders)) == 1
    first = holders[0]
    assert await submitted(store, "late", "q", dedup_key="order-7") == first
    await end(store, first)
    assert await submitted(store, "next", "q", dedup_key="order-7") == "next"


async def test_debounce_pushes_the_first_runs_start_back(store: Store) -> None:
    await submitted(store, "d1", "q", dedup_key="k", debounce=0.3)
    assert await store.candidates(limit=10) == []
    with pytest.raises(QueueFull, match="debounce"):
        await store.claim("d1", Owner.here(), ttl=30)
    await asyncio.sleep(0.2)
    assert await submitted(store, "d2", "q", dedup_key="k", debounce=0.3) == "d1"
    await asyncio.sleep(0.2)
    assert await store.candidates(limit=10) == []  # pushed back by the second submit
    await asyncio.sleep(0.2)
    assert await store.candidates(limit=10) == ["d1"]
    await store.claim("d1", Owner.here(), ttl=30)


async def test_bad_queue_input_is_refused(store: Store) -> None:
    with pytest.raises(ConfigError, match="queue name"):
        await store.enqueue("r", "")
    with pytest.raises(ConfigError, match="priority"):
        await store.enqueue("r", "q", priority=10**9)
    with pytest.raises(ConfigError, match="debounce needs a dedup_key"):
        await store.enqueue("r", "q", debounce=1)


async def test_schedule_rows(store: Store) -> None:
    spec = {"cron": "* * * * *"}
    assert await store.schedule_op(do="add", name="s", spec=spec, since=1000)
    assert not await store.schedule_op(do="add", name="s", spec=spec, since=1000)
    assert await store.schedule_op(do="advance", name="s", slot=5000)
    assert not await store.schedule_op(do="advance", name="s", slot=4000)
    assert await store.schedule_op(do="pause", name="s")
    [row] = await store.schedules()
    assert (row.name, row.spec, row.paused, row.since_ms, row.last_slot_ms) == (
        "s",
        spec,
        True,
        1000,
        5000,
    )
    assert await store.schedule_op(do="remove", name="s")
    assert await store.schedules() == []
