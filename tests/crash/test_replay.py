"""Replay one crash schedule by its seed: ``BIDE_CRASH_SEED=<seed> .venv/bin/python -m pytest
tests/crash/test_replay.py`` (add ``BIDE_CRASH_MUTANT=<name>`` to replay it under a mutant).

The seed is printed with every failing schedule. Skipped when no seed is given.
"""

from __future__ import annotations

import os

import pytest

from tests.crash import schedules
from tests.crash.harness import Harness

SEED = os.environ.get("BIDE_CRASH_SEED")


@pytest.mark.skipif(not SEED, reason="set BIDE_CRASH_SEED to replay a schedule")
async def test_replay_the_schedule_named_by_its_seed(harness: Harness) -> None:
    assert SEED is not None
    schedule = schedules.by_seed(int(SEED))
    mutant = os.environ.get("BIDE_CRASH_MUTANT")
    if mutant:
        schedule = schedule.under(mutant)
    outcome = await harness.run(schedule)
    assert not outcome.violations, outcome.describe()
