"""The nemesis suite: each family of attacks (``families.py``) on a few seeded schedules per
backend in the default run; the long set (``-m slow``) on many more."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.nemesis import report
from tests.nemesis.families import FAMILIES, POSTGRES_ONLY, SQLITE_ONLY
from tests.nemesis.harness import Outcome, Schedule, play
from tests.postgres import server

JOBS = int(os.environ.get("BIDE_NEMESIS_JOBS", "3"))
"""Schedules played at once: most of a schedule's time is spent waiting out leases and
settle times, not on the CPU."""

DEFAULT: dict[str, list[tuple[str, int]]] = {
    "cli_retyped": [("sqlite", 1), ("postgres", 1)],
    "console_stale": [("sqlite", 1), ("postgres", 1)],
    "slow_reconciler": [("sqlite", 1), ("postgres", 1)],
    "late_provider": [("sqlite", 2), ("postgres", 1)],
    "clock_skew": [("sqlite", 1), ("sqlite", 2), ("postgres", 3)],
    "live_takeover": [("sqlite", 1), ("sqlite", 3)],
    "stopped_driver": [("sqlite", 1), ("postgres", 1)],
    "stall": [("sqlite", 1), ("postgres", 1)],
    "kill": [("sqlite", 1)],
    "pg_terminate": [("postgres", 1)],
}
"""The default run: (backend, seed) per family."""


def backends() -> list[str]:
    why = server.reachable()
    if why is None:
        return ["sqlite", "postgres"]
    if os.environ.get("BIDE_TEST_REQUIRE_POSTGRES"):
        pytest.fail(why)
    return ["sqlite"]


async def play_all(schedules: list[Schedule], base: Path) -> list[Outcome]:
    slots = asyncio.Semaphore(JOBS)

    async def one(s: Schedule) -> Outcome:
        async with slots:
            return await play(s, base, FAMILIES[s.family])

    return list(await asyncio.gather(*(one(s) for s in schedules)))


def judge(outcomes: list[Outcome]) -> None:
    report.add(outcomes)
    failed = [o for o in outcomes if o.violations]
    assert not failed, "\n\n".join(o.describe() for o in failed)


@pytest.fixture(scope="module")
def default_set(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Outcome]]:
    """Every family's default schedules, played together (``JOBS`` at a time)."""
    usable = backends()
    schedules = [
        Schedule(family, seed, b)
        for family, picks in DEFAULT.items()
        for b, seed in picks
        if b in usable
    ]
    base = tmp_path_factory.mktemp("nemesis")
    outcomes = server.run(play_all(schedules, base))
    by_family: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_family.setdefault(o.schedule.family, []).append(o)
    return by_family


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family(family: str, default_set: dict[str, list[Outcome]]) -> None:
    """No schedule of the family charges twice, records a resolution for an attempt nobody
    judged, or leaves a run neither ended nor stopped with a reason."""
    outcomes = default_set.get(family, [])
    if not outcomes:
        pytest.skip("PostgreSQL is not reachable")
    judge(outcomes)


LONG = int(os.environ.get("BIDE_NEMESIS_LONG", "25"))
"""Seeds per family and backend in the long set."""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_long(backend: str, tmp_path: Path) -> None:
    """The long set: ``BIDE_NEMESIS_LONG`` seeds of every family on one backend."""
    if backend not in backends():
        pytest.skip("PostgreSQL is not reachable")
    skip = SQLITE_ONLY if backend == "postgres" else POSTGRES_ONLY
    schedules = [
        Schedule(family, 1000 + seed, backend)
        for family in sorted(FAMILIES)
        if family not in skip
        for seed in range(LONG)
    ]
    started = time.monotonic()
    outcomes = await play_all(schedules, tmp_path)
    report.note(backend, len(outcomes), time.monotonic() - started)
    judge(outcomes)
