"""Three worker processes on one PostgreSQL database, as three machines would be: one is
SIGKILLed mid-way and restarted later, a reconciler settles halts, and every run ends with
exactly one charge, no run driven by two owners at once and no record lost."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime import Journal, Resolution
from runtime.store.postgres.listen import APPLICATION_NAME
from tests.cli import owned
from tests.cli.test_ownership import spawn
from tests.postgres import server

TTL = 2.0
POLL = 0.2


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    async def go() -> list[tuple[Any, ...]]:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    return server.run(go())


def listening(url: str) -> int:
    """How many workers listen for ready runs on this database (a connection each)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        f"AND application_name = '{APPLICATION_NAME}'"
    )
    return int(rows(url, query)[0][0])


def statuses(url: str) -> Counter[str]:
    return Counter(str(s) for (s,) in rows(url, "SELECT status FROM bide_runs"))


def held_by(url: str, worker: str) -> dict[str, int]:
    found = rows(url, "SELECT run_id, epoch, owner FROM bide_leases WHERE NOT released")
    return {r: e for r, e, o in found if json.loads(o).get("worker") == worker}


async def submit(url: str, runs: int) -> None:
    async with Journal(url) as journal:
        for i in range(runs):
            await owned.payments.submit(
                f"r{i:03d}", "go", journal=journal, spec="tests.cli.owned:payments"
            )


async def reconcile(url: str, ledger: Path, runs: int) -> int:
    """Each halted call is looked up in the ledger and resolved, as a reconciler would."""
    done = 0
    charged = set(ledger.read_text().split("\n")) if ledger.exists() else set()
    async with Journal(url) as journal:
        for row in (await journal.list_runs(status="halted", limit=runs)).runs:
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


def note_takeovers(
    url: str, held: dict[str, int], killed: float, takeovers: dict[str, float]
) -> None:
    """Record, for each run the killed worker held, when another owner took its lease."""
    leases = {
        r: (e, ms) for r, e, ms in rows(url, "SELECT run_id, epoch, acquired_ms FROM bide_leases")
    }
    for run_id, epoch in held.items():
        if run_id not in takeovers and leases[run_id][0] > epoch:
            takeovers[run_id] = leases[run_id][1] / 1000 - killed


def three_workers_one_killed_and_restarted(
    url: str, tmp_path: Path, runs: int, *, prompt: bool = True
) -> None:
    """``prompt``: the survivors have free slots when the leases expire, so each takeover comes
    within TTL + poll. With a backlog, a worker claims least recently updated runs first, and
    the submitted runs still queued were updated before the orphans: those wait their turn."""
    ledger = tmp_path / "ledger"
    server.run(submit(url, runs))
    common = ["worker", "--db", url, "--concurrency", "8", "--poll", str(POLL)]
    common += ["--lease-ttl", str(TTL), "-q"]

    def worker(name: str) -> subprocess.Popen[str]:
        # Each its own host, as far as leases can tell: a survivor waits out the TTL.
        return spawn(*common, "--name", name, LEDGER=str(ledger), BIDE_HOST=f"host-{name}")

    workers = {name: worker(name) for name in ("w-a", "w-b", "w-c")}
    restarted: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 240
        # Mid-way, and while the worker to be killed drives some runs.
        while statuses(url)["completed"] < runs // 4 or not (held := held_by(url, "w-a")):
            assert time.monotonic() < deadline, statuses(url)
            time.sleep(0.05)
        workers["w-a"].send_signal(signal.SIGKILL)
        workers["w-a"].communicate()
        killed = time.time()
        takeovers: dict[str, float] = {}
        reconciled = 0
        while statuses(url)["completed"] < runs:
            assert time.monotonic() < deadline, statuses(url)
            if restarted is None and statuses(url)["completed"] >= runs // 2:
                restarted = worker("w-a")  # back on its host, later
            note_takeovers(url, held, killed, takeovers)
            reconciled += server.run(reconcile(url, ledger, runs))
            time.sleep(0.1)
        note_takeovers(url, held, killed, takeovers)  # those that finished since the last look
        alive = [p for p in (workers["w-b"], workers["w-c"], restarted) if p is not None]
        # Let each get as far as handling SIGTERM: a worker listens for ready runs once it
        # runs, after its signal handlers are in place (a fixed wait is too short under load).
        while listening(url) < len(alive):
            assert time.monotonic() < deadline, f"{listening(url)} of {len(alive)} listening"
            time.sleep(0.05)
        for p in alive:
            p.send_signal(signal.SIGTERM)
        for p in alive:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-2000:]
    finally:
        for p in [*workers.values(), restarted]:
            if p is not None and p.returncode is None:
                p.kill()
                p.communicate()
    times = sorted(takeovers.values())
    print(
        f"\n{len(held)} runs held by the killed worker; taken over after "
        f"{', '.join(f'{t:.2f}' for t in times)} s (TTL {TTL} s, poll {POLL} s); "
        f"{reconciled} halts reconciled"
    )
    # Each run the killed worker held was taken over, or it had ended it under that very epoch
    # between the look at its leases and the kill (released or not, then).
    final = {r: e for r, e in rows(url, "SELECT run_id, epoch FROM bide_leases")}
    ended = {
        r: json.loads(p).get("epoch")
        for r, p in rows(url, "SELECT run_id, payload FROM bide_records WHERE key = 'end'")
    }
    for run_id, epoch in held.items():
        assert run_id in takeovers or final[run_id] == ended[run_id] == epoch, run_id
    # Every held run not ended before the kill was taken over (checked above); under load all
    # of them may have ended in between, and then there is no takeover to time.
    if prompt and times:
        assert max(times) <= TTL + POLL + 2.0
    lines = ledger.read_text().splitlines()
    assert Counter(lines) == Counter(f"r{i:03d} c1" for i in range(runs)), "one charge per run"
    # No run driven by two owners at once: in commit order, a run's epochs never go back.
    last: dict[str, int] = {}
    for run_id, payload in rows(url, "SELECT run_id, payload FROM bide_records ORDER BY seq"):
        epoch = json.loads(payload).get("epoch") if payload.startswith("{") else None
        if epoch is not None:
            assert epoch >= last.get(run_id, 0), f"run {run_id}: epoch {epoch} after a newer one"
            last[run_id] = epoch
    assert len(last) == runs
    # No record lost: every run's journal reads back whole, ending in its end record.
    ends = rows(url, "SELECT count(*) FROM bide_records WHERE key = 'end'")
    assert ends == [(runs,)]


def test_three_workers_one_killed_and_restarted_every_run_completes_once(
    pg_url: str, tmp_path: Path
) -> None:
    three_workers_one_killed_and_restarted(pg_url, tmp_path, 60)


@pytest.mark.slow
def test_three_hundred_runs_on_three_workers(pg_url: str, tmp_path: Path) -> None:
    """The issue's figure: 300 runs with a side effect each."""
    three_workers_one_killed_and_restarted(pg_url, tmp_path, 300, prompt=False)
