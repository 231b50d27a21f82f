"""The ``worker`` command owns its process: while it serves, the cyclic collector is tuned for
many runs in flight, and put back as it was when it stops (the library never touches it)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from runtime import Journal
from runtime.cli.worker import YOUNG_THRESHOLD
from tests.cli import agents
from tests.cli.invoke import Cli


async def _submit(db: Path) -> None:
    async with Journal(db) as journal:
        spec = "tests.cli.agents:collector"
        await agents.collector.submit("r1", "go", journal=journal, spec=spec)


def test_the_worker_freezes_start_up_and_collects_less_often_while_it_serves(
    cli: Cli, tmp_path: Path
) -> None:
    db = tmp_path / "bide.db"
    asyncio.run(_submit(db))
    before = gc.get_threshold()
    agents.COLLECTOR_SEEN.clear()
    done = cli(
        "worker", "--db", str(db), "--agent", "tests.cli.agents:collector",
        "--poll", "0.05", "--exit-when-idle", "0.3",
    )  # fmt: skip
    assert done.code == 0, done.err
    ((threshold, frozen),) = agents.COLLECTOR_SEEN
    assert threshold == YOUNG_THRESHOLD
    assert frozen > 1000, "what start-up made is out of the collector's way"
    assert gc.get_threshold() == before, "the collector is put back when the worker stops"
    assert gc.get_freeze_count() == 0
