"""Worker processes sharing one journal file: one is SIGKILLed mid-way, the other takes its runs
over once their leases expire, and every run ends with exactly one charge."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

from runtime import Journal, Resolution
from tests.cli import owned
from tests.cli.test_ownership import spawn

RUNS = 100
"""Enough that the killed worker holds several runs mid-call and the survivor finishes many."""
TTL = 2.0
POLL = 0.2


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _held_by(db: Path, worker: str) -> dict[str, int]:
    """Runs whose lease the worker holds, unreleased, with the epoch."""
    rows = _rows(db, "SELECT run_id, epoch, owner FROM bide_leases WHERE NOT released")
    return {str(r): int(e) for r, e, o in rows if json.loads(str(o)).get("worker") == worker}  # type: ignore[call-overload]


def _statuses(db: Path) -> Counter[str]:
    return Counter(str(s) for (s,) in _rows(db, "SELECT status FROM bide_runs"))


async def _submit(db: Path) -> None:
    async with Journal(db) as journal:
        for i in range(RUNS):
            await owned.payments.submit(
                f"r{i:03d}", "go", journal=journal, spec="tests.cli.owned:payments"
            )


async def _reconcile(db: Path, ledger: Path) -> int:
    """What a reconciler does: each halted call is looked up in the ledger and resolved."""
    done = 0
    charged = set(ledger.read_text().split("\n")) if ledger.exists() else set()
    async with Journal(db) as journal:
        for row in (await journal.list_runs(status="halted", limit=RUNS)).runs:
            state = await journal.require(row.run_id)
            for c in state.halted_calls():
                if f"{row.run_id} {c.call.id}" in charged:
                    resolution = Resolution.succeeded({"charged": 5})
                else:
                    resolution = Resolution.not_executed()
                await journal.resolve(
                    row.run_id, c.call.id, resolution, attempt=c.attempt, by="reconciler"
                )
                done += 1
    return done


def test_two_workers_one_killed_mid_way_every_run_completes_with_one_charge(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"
    asyncio.run(_submit(db))
    common = ["worker", "--db", str(db), "--concurrency", "8", "--poll", str(POLL)]
    common += ["--lease-ttl", str(TTL)]
    # Two hosts, as far as leases can tell: the survivor must wait for the TTL, not see a pid.
    # Quiet: a worker's progress lines would fill a pipe nobody reads until the end.
    common += ["-q"]
    # Each charge takes a moment to answer, so the kill finds the killed worker mid-call.
    env = {"LEDGER": str(ledger), "CHARGE_PAUSE": "0.2"}
    a = spawn(*common, "--name", "w-a", BIDE_HOST="host-a", **env)
    b = spawn(*common, "--name", "w-b", BIDE_HOST="host-b", **env)
    try:
        deadline = time.monotonic() + 120
        # Mid-way, and while the worker to kill holds runs: on a loaded machine the other one
        # may have done a quarter of them before this one even started.
        while _statuses(db)["completed"] < RUNS // 4 or not (held := _held_by(db, "w-a")):
            assert time.monotonic() < deadline, _statuses(db)
            time.sleep(0.05)
        a.send_signal(signal.SIGKILL)
        a.communicate()
        killed = time.time()
        takeovers: dict[str, float] = {}
        reconciled = 0
        while _statuses(db)["completed"] < RUNS:
            assert time.monotonic() < deadline, _statuses(db)
            leases = {
                str(r): (int(e), int(ms))  # type: ignore[call-overload]
                for r, e, ms in _rows(db, "SELECT run_id, epoch, acquired_ms FROM bide_leases")
            }
            for run_id, epoch in held.items():
                if run_id not in takeovers and leases[run_id][0] > epoch:
                    takeovers[run_id] = leases[run_id][1] / 1000 - killed
            reconciled += asyncio.run(_reconcile(db, ledger))
            time.sleep(0.05)
        b.send_signal(signal.SIGTERM)
        _, b_err = b.communicate(timeout=60)
    finally:
        for p in (a, b):
            if p.returncode is None:
                p.kill()
                p.communicate()
    assert b.returncode == 0, b_err[-2000:]
    times = sorted(takeovers.values())
    print(
        f"\n{len(held)} runs held by the killed worker; taken over after "
        f"{', '.join(f'{t:.2f}' for t in times)} s (TTL {TTL} s, poll {POLL} s); "
        f"{reconciled} halts reconciled"
    )
    # Each run the killed worker held was taken over, or had ended by the kill: under its own
    # lease (the kill came before the release), or before it (a claim of a run that another
    # drive had just finished: the drive found the end and did nothing).
    ends = {
        str(r): json.loads(str(p)).get("epoch")
        for r, p in _rows(db, "SELECT run_id, payload FROM bide_records WHERE key = 'end'")
    }
    for run_id, epoch in held.items():
        assert run_id in takeovers or ends[run_id] <= epoch, run_id
    assert times and max(times) <= TTL + POLL + 2.0
    lines = ledger.read_text().splitlines()
    assert Counter(lines) == Counter(f"r{i:03d} c1" for i in range(RUNS)), "one charge per run"
    _no_run_driven_by_two_owners_at_once(db)


def _no_run_driven_by_two_owners_at_once(db: Path) -> None:
    """Every record a drive writes carries its lease's epoch: in commit order, a run's epochs
    never go back (an older owner never wrote after a newer one took over)."""
    rows = _rows(db, "SELECT run_id, payload FROM bide_records ORDER BY seq")
    last: dict[str, int] = {}
    for run_id, payload in rows:
        epoch = json.loads(str(payload)).get("epoch") if str(payload).startswith("{") else None
        if epoch is None:
            continue
        assert epoch >= last.get(str(run_id), 0), f"run {run_id}: epoch {epoch} after a newer one"
        last[str(run_id)] = epoch
    assert len(last) == RUNS
