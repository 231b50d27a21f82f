"""Replay one schedule: ``NEMESIS_FAMILY``, ``NEMESIS_SEED`` and ``NEMESIS_BACKEND`` name it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.nemesis.families import FAMILIES
from tests.nemesis.harness import Schedule, play


async def test_replay(tmp_path: Path) -> None:
    family = os.environ.get("NEMESIS_FAMILY")
    if not family:
        pytest.skip("name a schedule: NEMESIS_FAMILY, NEMESIS_SEED, NEMESIS_BACKEND")
    schedule = Schedule(
        family,
        int(os.environ.get("NEMESIS_SEED", "1")),
        os.environ.get("NEMESIS_BACKEND", "sqlite"),
    )
    outcome = await play(schedule, tmp_path, FAMILIES[family])
    print(outcome.describe())
    assert not outcome.violations, outcome.describe()
