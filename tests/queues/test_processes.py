"""Schedules and queues with real worker processes, on SQLite and PostgreSQL: one run per slot
while a worker is SIGKILLed every slot; a per-key limit proved from the journal; one run for
ten concurrent submits with one dedup key."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import random
import signal
import subprocess
import time

import pytest

from runtime import Journal
from runtime.records import START
from tests.cli.test_ownership import ready, spawn
from tests.queues.proofs import key_overlaps

AGENT = "tests.queues.agents:worker_agent"
TTL = 2.0


def url_of(request: pytest.FixtureRequest, backend: str) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(request.getfixturevalue("db_path"))


def worker(url: str, name: str, *extra: str, **env: str) -> subprocess.Popen[str]:
    # Each its own host, as far as leases can tell: a survivor waits out a dead one's TTL.
    argv = ["worker", "--db", url, "--poll", "0.1", "--lease-ttl", str(TTL), "-q"]
    return spawn(*argv, "--name", name, *extra, BIDE_HOST=f"host-{name}", **env)


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for p in processes:
        if p.returncode is None:
            p.kill()
            p.communicate()


def slot_of(run_id: str) -> dt.datetime:
    return dt.datetime.strptime(run_id.rsplit(":", 1)[1], "%Y%m%dT%H%M%SZ")


async def _schedule_runs(url: str) -> list[str]:
    async with Journal(url) as journal:
        runs = []
        cursor = None
        while True:
            page = await journal.list_runs(prefix="schedule:tick:", limit=200, before=cursor)
            runs += [r.run_id for r in page.runs]
            cursor = page.next_cursor
            if cursor is None:
                return sorted(runs)


def one_run_per_slot_while_killing(url: str, slots: int) -> None:
    async def add() -> None:
        async with Journal(url) as journal:
            await journal.schedules.add(
                "tick",
                cron="* * * * * *",
                agent=AGENT,
                input="tick",
                missed="catch-up",
                catch_up=60,
            )

    asyncio.run(add())
    names = iter(f"w{n}" for n in range(1000))
    live = [worker(url, next(names)) for _ in range(3)]
    every: list[subprocess.Popen[str]] = list(live)
    kills = 0
    try:
        deadline = time.monotonic() + slots * 4 + 60
        # One kill per slot until the schedule has started runs for ``slots`` slots.
        while len(asyncio.run(_schedule_runs(url))) < slots:
            assert time.monotonic() < deadline, "the schedule's runs came too slowly"
            # Just after a slot is due, while workers submit it: kill one, start another.
            time.sleep(1 - time.time() % 1 + random.uniform(0.0, 0.3))
            victim = live.pop(random.randrange(len(live)))
            victim.send_signal(signal.SIGKILL)
            victim.communicate()
            kills += 1
            fresh = worker(url, next(names))
            live.append(fresh)
            every.append(fresh)

        async def pause() -> None:
            async with Journal(url) as journal:
                await journal.schedules.pause("tick")

        asyncio.run(pause())
        paused = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        # Every run started ends (the killed workers' runs are taken over after the TTL).
        deadline = time.monotonic() + 60
        while True:
            runs = asyncio.run(_schedule_runs(url))
            statuses = asyncio.run(_statuses(url, runs))
            if runs and all(s == "completed" for s in statuses.values()):
                break
            assert time.monotonic() < deadline, statuses
            time.sleep(0.2)
    finally:
        stop(every)
    found = [slot_of(r) for r in runs]
    assert len(found) >= slots, f"{len(found)} runs over {slots} slots"
    assert found == sorted(set(found))
    gaps = [b - a for a, b in itertools.pairwise(found)]
    assert all(g == dt.timedelta(seconds=1) for g in gaps), "a slot started no run"
    assert (paused - found[-1]).total_seconds() < 10, "the last slots before the pause started"
    starts = asyncio.run(_starts(url, runs))
    assert set(starts.values()) == {1}, "each run started once"
    # A submit takes epoch 1 and a worker's drive epoch 2: more means a dead holder's lease
    # was taken over (a submit or a drive cut short by a kill).
    taken = sum(1 for epoch in asyncio.run(_epochs(url, runs)).values() if epoch > 2)
    print(
        f"\n{len(found)} slots, one run each; {kills} workers SIGKILLed, one per slot; "
        f"{taken} runs taken over from a killed worker"
    )


async def _epochs(url: str, runs: list[str]) -> dict[str, int]:
    async with Journal(url) as journal:
        return {r: lease.epoch for r in runs if (lease := await journal.lease(r)) is not None}


async def _statuses(url: str, runs: list[str]) -> dict[str, str | None]:
    async with Journal(url) as journal:
        return {r: await journal.status(r) for r in runs}


async def _starts(url: str, runs: list[str]) -> dict[str, int]:
    async with Journal(url) as journal:
        return {r: len(await journal.store.load(r, prefix=START)) for r in runs}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_schedule_starts_one_run_per_slot_while_a_worker_dies_each_slot(
    request: pytest.FixtureRequest, backend: str
) -> None:
    one_run_per_slot_while_killing(url_of(request, backend), 20)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_a_schedule_one_run_per_slot_slow(request: pytest.FixtureRequest, backend: str) -> None:
    """The default test's figure on PostgreSQL too, and longer."""
    one_run_per_slot_while_killing(url_of(request, backend), 20 if backend == "postgres" else 40)


def per_key_limit(url: str, runs: int, keys: int) -> None:
    async def submit() -> None:
        from tests.queues.agents import worker_agent

        async with Journal(url) as journal:
            await journal.queues.set("pay", key_concurrency=1)
            for n in range(runs):
                await worker_agent.submit(
                    f"r{n:03d}",
                    "pay",
                    journal=journal,
                    spec=AGENT,
                    queue="pay",
                    concurrency_key=f"customer:{n % keys}",
                )

    asyncio.run(submit())
    extra = ("--concurrency", "4", "--exit-when-idle", "1.5")
    workers = [worker(url, f"k{n}", *extra, STEP="0.02") for n in range(3)]
    try:
        for p in workers:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
    finally:
        stop(workers)

    async def check() -> None:
        async with Journal(url) as journal:
            statuses = {await journal.status(f"r{n:03d}") for n in range(runs)}
            assert statuses == {"completed"}
            assert await key_overlaps(journal, "pay", 1) == []
            owners = await journal.store._queue_read(  # type: ignore[attr-defined]
                "SELECT owner FROM bide_leases", {}
            )
            assert len({o for (o,) in owners}) > 1, "the runs went through several workers"

    asyncio.run(check())


@pytest.mark.parametrize(
    ("backend", "runs"),
    [
        ("sqlite", 100),
        pytest.param("postgres", 100, marks=pytest.mark.slow),
    ],
)
def test_a_per_key_limit_of_one_holds_for_runs_of_5_keys_on_3_workers(
    request: pytest.FixtureRequest, backend: str, runs: int
) -> None:
    """100 runs; on PostgreSQL in the slow set (about 30 s: a run's commits there are slower;
    the default suite holds PostgreSQL to the claim rule in ``tests/journal/test_queues.py``)."""
    per_key_limit(url_of(request, backend), runs, 5)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_ten_concurrent_submits_with_one_dedup_key_make_one_run(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Ten processes (the default suite has ten concurrent submits in one process, on every
    store: ``tests/journal/test_queues.py``)."""
    url = url_of(request, backend)
    # The journal exists first: ten processes do not race to create the file.
    asyncio.run(_statuses(url, []))
    argv = ["submit", "--db", url, "--agent", AGENT, "--queue", "orders", "--json", "-q"]
    processes = [
        ready(*argv, "--dedup-key", "order-42", "--run-id", f"s{n}", "charge order 42")
        for n in range(10)
    ]
    try:
        for p in processes:  # each imported bide (``ready``) before any is told to go
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in processes:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-2000:]
            outs.append(out)
    finally:
        stop(processes)
    holders = {json.loads(out[out.index("{") :])["run_id"] for out in outs}
    assert len(holders) == 1

    async def runs() -> list[str]:
        async with Journal(url) as journal:
            return [r.run_id for r in (await journal.list_runs()).runs]

    assert asyncio.run(runs()) == list(holders)
