"""Six deliberately broken runtimes (``tests/crash/mutants.py``): the crash suite must catch each.

A mutant is run against its probe schedules in order until one of them fails; one that no
schedule fails has survived, and the suite fails. A harness error is never taken for a catch.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.crash import report, schedules
from tests.crash.harness import Harness, Outcome
from tests.crash.mutants import MUTANTS


def _sound(outcome: Outcome) -> None:
    broken = [v for v in outcome.violations if v.startswith("harness error")]
    assert not broken, f"{outcome.schedule.name} under {outcome.schedule.mutant}: {broken}"


async def first_catch(harness: Harness, mutant: str) -> Outcome | None:
    for probe in schedules.mutant_probes(mutant):
        outcome = await harness.run(probe.under(mutant))
        _sound(outcome)
        if outcome.violations:
            return outcome
    return None


async def test_every_mutant_is_caught_by_some_schedule(harness: Harness) -> None:
    started = time.monotonic()
    caught = await asyncio.gather(*(first_catch(harness, m) for m in MUTANTS))
    for mutant, outcome in zip(MUTANTS, caught, strict=True):
        if outcome is None:
            report.add_mutant(MUTANTS[mutant], "SURVIVED", "-")
        else:
            report.add_mutant(MUTANTS[mutant], outcome.schedule.name, report.worst(outcome))
    report.MUTANT_SECONDS.append(time.monotonic() - started)
    survivors = [MUTANTS[m] for m, o in zip(MUTANTS, caught, strict=True) if o is None]
    assert not survivors, f"mutants no schedule caught: {survivors}"


@pytest.mark.slow
async def test_slow_how_many_schedules_catch_each_mutant(harness: Harness) -> None:
    started = time.monotonic()
    probes = schedules.native_points() + schedules.mcp_points() + schedules.meeting()
    for mutant, what in MUTANTS.items():
        outcomes = await harness.run_all([p.under(mutant) for p in probes])
        for outcome in outcomes:
            _sound(outcome)
        failing = [o for o in outcomes if o.violations]
        first = failing[0] if failing else None
        report.add_mutant(
            what,
            f"{len(failing)} of {len(outcomes)} schedules"
            + (f", e.g. {first.schedule.name}" if first else ""),
            report.worst(first) if first else "-",
        )
        assert failing, f"{what} survived every schedule"
    report.MUTANT_SECONDS.append(time.monotonic() - started)
