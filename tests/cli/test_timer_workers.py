"""A timer outlives the worker that set it: the worker is SIGKILLed while timers come due, another
takes over, and every run's timer fires (never early), its charge once (both backends). A charge
the kill cut off halts, and the worker's reconciler settles it from the ledger."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from runtime import Journal
from tests.cli import owned
from tests.cli.test_ownership import spawn

RUNS = 8
NAP = 1.5
TTL = 2.0


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "bide.db")


async def _submit(db: str) -> dict[str, float]:
    """Submit the runs; when each was submitted (wall clock)."""
    started = {}
    async with Journal(db) as journal:
        for i in range(RUNS):
            run_id = f"n{i:02d}"
            started[run_id] = time.time()
            await owned.napping.submit(
                run_id, "go", journal=journal, spec="tests.cli.owned:napping"
            )
    return started


async def _statuses(db: str) -> Counter[str]:
    async with Journal(db, migrate=False) as journal:
        page = await journal.list_runs(limit=RUNS)
        return Counter(r.status for r in page.runs)


async def _waits(db: str) -> Counter[str]:
    """How many wait records each run holds: a timer is journaled once, never restarted."""
    found: Counter[str] = Counter()
    async with Journal(db, migrate=False) as journal:
        for i in range(RUNS):
            state = await journal.require(f"n{i:02d}")
            found[state.run_id] = sum(r.kind == "wait" for r in state.records)
    return found


def test_a_timer_outlives_its_worker_and_fires_once_on_another(db: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    started = asyncio.run(_submit(db))
    common = ["worker", "--db", db, "--concurrency", "4", "--poll", "0.1", "--lease-ttl", str(TTL)]
    env = {"LEDGER": str(ledger), "NAP": str(NAP), "SETTLE": "0.5"}
    # Two hosts, as far as leases can tell: the survivor waits for the killed one's leases.
    a = spawn(*common, "-q", "--name", "w-a", BIDE_HOST="host-a", **env)
    b = None
    try:
        deadline = time.monotonic() + 120
        # Killed as the timers come due: some runs woke under it, some are mid-drive.
        while not ledger.exists() or len(ledger.read_text().splitlines()) < 3:
            assert time.monotonic() < deadline, asyncio.run(_statuses(db))
            time.sleep(0.02)
        a.send_signal(signal.SIGKILL)
        a.communicate()
        b = spawn(*common, "-q", "--name", "w-b", BIDE_HOST="host-b", **env)
        while asyncio.run(_statuses(db))["completed"] < RUNS:
            assert time.monotonic() < deadline, asyncio.run(_statuses(db))
            time.sleep(0.1)
        b.send_signal(signal.SIGTERM)
        _, b_err = b.communicate(timeout=60)
        assert b.returncode == 0, b_err[-2000:]
    finally:
        for p in (a, b):
            if p is not None and p.returncode is None:
                p.kill()
                p.communicate()
    lines = [line.split() for line in ledger.read_text().splitlines()]
    charges = Counter(run for run, what, *_ in lines if what == "c2")
    assert charges == Counter({f"n{i:02d}": 1 for i in range(RUNS)}), "one charge per run"
    woke = {}
    for run, what, *rest in lines:
        if what == "woke":
            woke.setdefault(run, float(rest[0]))
    assert set(woke) == set(started)
    early = {r: round(woke[r] - started[r], 3) for r in woke if woke[r] - started[r] < NAP}
    assert not early, f"woke before their timers were due: {early}"
    assert asyncio.run(_waits(db)) == Counter({f"n{i:02d}": 1 for i in range(RUNS)})
