"""Queues and schedules with in-process workers on a real journal."""

from __future__ import annotations

import asyncio

from runtime import Journal, Worker
from runtime.errors import ConfigError
from tests.queues import agents
from tests.queues.proofs import key_overlaps


async def until_ended(journal: Journal, run_ids: list[str], seconds: float = 60) -> None:
    async with asyncio.timeout(seconds):
        while True:
            ended = [await journal.status(r) for r in run_ids]
            if all(s == "completed" for s in ended):
                return
            await asyncio.sleep(0.05)


async def test_two_workers_keep_a_per_key_limit_of_one(journal: Journal) -> None:
    await journal.queues.set("pay", key_concurrency=1)
    agent = agents.make()
    runs = [f"r{n:02d}" for n in range(20)]
    for n, run_id in enumerate(runs):
        await agent.submit(run_id, "go", journal=journal, queue="pay", concurrency_key=f"k{n % 4}")
    async with (
        Worker(journal, agent=agent, concurrency=4, poll=0.05, name="a"),
        Worker(journal, agent=agent, concurrency=4, poll=0.05, name="b"),
    ):
        await until_ended(journal, runs)
    assert await key_overlaps(journal, "pay", 1) == []
    [info] = await journal.queues.list()
    assert (info.name, info.active, info.waiting) == ("pay", 0, 0)


async def test_priority_orders_starts_within_a_queue(journal: Journal) -> None:
    await journal.queues.set("one", concurrency=1)
    agent = agents.make()
    for n, priority in enumerate([0, 5, 1, 9]):
        await agent.submit(f"p{n}", "go", journal=journal, queue="one", priority=priority)
    async with Worker(journal, agent=agent, concurrency=4, poll=0.05):
        await until_ended(journal, ["p0", "p1", "p2", "p3"])
    started = await journal.store._queue_read(  # type: ignore[attr-defined]
        "SELECT run_id FROM bide_queue_runs ORDER BY started_seq", {}
    )
    assert [r for (r,) in started] == ["p3", "p1", "p2", "p0"]


async def test_ten_concurrent_submits_with_one_dedup_key_make_one_run(journal: Journal) -> None:
    agent = agents.make()
    results = await asyncio.gather(
        *(
            agent.submit(f"d{n}", "go", journal=journal, queue="q", dedup_key="order-1")
            for n in range(10)
        )
    )
    assert len({r.run_id for r in results}) == 1
    assert len((await journal.list_runs()).runs) == 1


async def test_queue_options_need_a_queue(journal: Journal) -> None:
    agent = agents.make()
    try:
        await agent.submit("x", "go", journal=journal, dedup_key="k")
    except ConfigError as exc:
        assert "needs a queue" in str(exc)
    else:
        raise AssertionError("a dedup key without a queue was accepted")


async def test_a_per_second_schedule_starts_one_run_per_slot(journal: Journal) -> None:
    await journal.schedules.add(
        "tick",
        cron="* * * * * *",
        agent="tests.queues.agents:worker_agent",
        input="tick",
        missed="catch-up",
        catch_up=10,
    )
    agent = agents.make()
    async with (
        Worker(journal, agent=agent, poll=0.1, name="a"),
        Worker(journal, agent=agent, poll=0.1, name="b"),
    ):
        await asyncio.sleep(2.2)
    runs = [r.run_id for r in (await journal.list_runs()).runs]
    assert 1 <= len(runs) <= 3, runs
    assert all(r.startswith("schedule:tick:") for r in runs)
    [info] = await journal.schedules.list()
    assert info.last_run in runs
    assert info.next_slot_ms is not None
