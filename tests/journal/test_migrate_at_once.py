"""Found by the crash suite's worker schedules: new journals opened at the same time in one
process each migrate. Alembic's ``context`` and ``op`` are process-wide, and each
``SQLiteStore.open`` migrates in a thread of its own: the upgrades take turns
(``migrate._ALEMBIC``). A service that opens a journal per tenant at start-up does this.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime import Journal


async def test_new_journals_opened_at_once_in_one_process_are_all_migrated(
    tmp_path: Path,
) -> None:
    async def open_one(i: int) -> int:
        async with Journal(tmp_path / f"j{i}.db") as journal:
            return len(await journal.store.load("r"))

    got = await asyncio.gather(*(open_one(i) for i in range(8)), return_exceptions=True)
    assert got == [0] * 8
