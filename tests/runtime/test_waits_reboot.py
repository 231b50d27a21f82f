"""A SQLite journal carried over a reboot: its timers were due on the old boot's clock, which
means nothing on the new one (the boot-time clock starts again at each boot). Such a wait is
judged once by the wall-clock time it kept, and from then on on the new boot's clock."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from runtime import Journal, RunStatus
from runtime.ownership import boot_id
from tests.helpers import Ledger
from tests.runtime.test_waits import sleeper

OLD_BOOT = "00000000-0000-4000-8000-000000000000"
FAR = 10**13
"""A due time on the old boot's clock that this boot's clock will not reach for centuries."""


async def _slept_before_a_reboot(path: Path, ledger: Ledger, *, wall_left_s: float) -> None:
    """Start a run whose tool sleeps, then rewrite its file as a previous boot would have left
    it: the wait timed on that boot's clock, due ``wall_left_s`` from now on the wall clock."""
    async with Journal(path) as journal:
        first = await sleeper(ledger, 3600).run("r", "nap", journal=journal)
        assert first.status is RunStatus.WAITING
    at_ms = time.time_ns() // 1_000_000 + int(wall_left_s * 1000)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE bide_records SET payload = json_set(payload, '$.clock', ?, '$.due_ms', ?, "
            "'$.at_ms', ?) WHERE key = 'wait/c1/1'",
            (OLD_BOOT, FAR, at_ms),
        )
        conn.execute("UPDATE bide_runs SET due_clock = ?, due_ms = ?", (OLD_BOOT, FAR))
    assert boot_id() not in (None, OLD_BOOT)


async def test_a_timer_whose_wall_time_passed_before_the_reboot_fires_after_it(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    path = tmp_path / "journal.db"
    await _slept_before_a_reboot(path, ledger, wall_left_s=-60)
    async with Journal(path) as journal:
        assert "r" in dict(await journal.store.claimable())  # due on another boot's clock
        done = await sleeper(ledger, 3600).resume("r", journal=journal)
    assert (done.status, done.output) == (RunStatus.COMPLETED, "done")
    assert ledger.count("woke") == 1


async def test_a_timer_not_yet_due_on_the_wall_clock_waits_out_the_rest_on_the_new_boots_clock(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    path = tmp_path / "journal.db"
    await _slept_before_a_reboot(path, ledger, wall_left_s=600)
    async with Journal(path) as journal:
        assert "r" in dict(await journal.store.claimable())  # judged once, by its wall time
        again = await sleeper(ledger, 3600).resume("r", journal=journal)
        assert again.status is RunStatus.WAITING and ledger.count("woke") == 0
        now = await journal.store.clock_ms()
        (waiting,) = again.waiting
        assert waiting.due_ms is not None and 590_000 < waiting.due_ms - now <= 600_000
        row = await journal.store.run_row("r")
        assert row is not None and row.status == "waiting"
        assert "r" not in dict(await journal.store.claimable())  # now on this boot's clock
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT due_clock FROM bide_runs").fetchone()[0] == boot_id()
