"""The default peer chaos schedules take the path they are chosen for."""

from __future__ import annotations

import random
import sys

from tests.adapters.peer_chaos import HARNESS, TWO_ATTEMPTS, needs_harness


@needs_harness
def test_the_two_attempt_seeds_are_what_they_say() -> None:
    """The seeds above do plan a kill before the charge, then one after it (the harness's
    own draw), so the default schedules settle a halt on a second attempt."""
    sys.path.insert(0, str(HARNESS))
    try:
        import workload
    finally:
        sys.path.remove(str(HARNESS))
    for seed in TWO_ATTEMPTS:
        rng = random.Random(1_000_003 * (seed + 1))
        plan = [rng.choice(workload.POINTS) if rng.random() < 0.75 else None for _ in range(2)]
        assert plan == ["before_charge", "after_charge_fsync"], (seed, plan)
