"""Runs per second against 1, 2, 4, 8 and 16 worker processes on one PostgreSQL, beside the
database's own commit rate measured in the same run by a raw asyncpg loop.

Run: python bench/workers.py [--quick] [--rounds N] [--runs R] [--server postgresql://...]
[--json out.json]. It makes a database of its own on that server (dropped at the end). Each
point starts N ``python -m runtime worker`` processes, waits until every one listens, submits R
runs of ``bench.workers_agent`` (one side effect each: 7 records) and times the runs' end
records on the server's clock: runs per second over the middle 80% of the ends (the workers'
start and the last stragglers left out). Rounds alternate the order of the points (1..16, then
16..1), and each round measures the raw commit rate first: single-row INSERTs committed one by
one on 1 connection, and on 16 at once (what group commit in the WAL gives many writers).
``Write transactions per run`` is the server's transaction-id counter over the point divided by
the runs: every transaction that wrote (submit, claim, lease, records, renewals, release).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import asyncpg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from bench.anchors import cpu_model  # noqa: E402
from bench.workers_agent import make_agent  # noqa: E402
from runtime import Journal  # noqa: E402

COUNTS = (1, 2, 4, 8, 16)
SPEC = "bench.workers_agent:make_agent"
RAW_TABLE = (
    "CREATE TABLE IF NOT EXISTS raw (seq bigserial PRIMARY KEY, run_id text NOT NULL, "
    "key text NOT NULL, payload text NOT NULL, created_ms bigint NOT NULL, UNIQUE (run_id, key))"
)
INSERT = "INSERT INTO raw (run_id, key, payload, created_ms) VALUES ($1, $2, $3, 0)"
ROW = '{"value": "' + "x" * 180 + '"}'


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def raw_commit_rate(dsn: str, conns: int, seconds: float) -> float:
    """Single-row INSERTs committed one by one, per second, on ``conns`` connections at once."""
    connections = [await asyncpg.connect(dsn) for _ in range(conns)]
    try:
        stop = time.perf_counter() + seconds
        tag = time.monotonic_ns()

        async def loop(c: Any, k: int) -> int:
            n = 0
            while time.perf_counter() < stop:
                await c.execute(INSERT, f"raw{tag}-{k}", str(n), ROW)
                n += 1
            return n

        t = time.perf_counter()
        done = await asyncio.gather(*(loop(c, k) for k, c in enumerate(connections)))
        return sum(done) / (time.perf_counter() - t)
    finally:
        for c in connections:
            await c.close()


async def scalar(dsn: str, sql: str) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


async def listening(dsn: str) -> int:
    return int(
        await scalar(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'bide-listen'",
        )
    )


def start_workers(url: str, n: int, concurrency: int, logs: Any) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "runtime", "worker", "--db", url, "-q"]
    argv += ["--concurrency", str(concurrency), "--poll", "0.5"]
    return [
        subprocess.Popen([*argv, "--name", f"bench-{i}"], env=env, stdout=logs, stderr=logs)
        for i in range(n)
    ]


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=60)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


async def lock_waiters(dsn: str, stop: asyncio.Event, seen: list[int]) -> None:
    """Every 0.1 s, how many of the database's sessions wait for an advisory lock (the write
    lock every batch of every process takes, until its COMMIT)."""
    conn = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            seen.append(
                int(
                    await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock' "
                        "AND wait_event = 'advisory'"
                    )
                )
            )
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def point(url: str, dsn: str, n: int, runs: int, concurrency: int) -> dict[str, Any]:
    """R runs through ``n`` worker processes; runs per second over the middle of their ends."""
    with tempfile.TemporaryFile() as logs:
        return await _point(url, dsn, n, runs, concurrency, logs)


async def _point(
    url: str, dsn: str, n: int, runs: int, concurrency: int, logs: Any
) -> dict[str, Any]:
    prefix = f"w{n}-{time.monotonic_ns()}-"
    workers = start_workers(url, n, concurrency, logs)
    load_before = loadavg()
    try:
        deadline = time.monotonic() + 120
        while await listening(dsn) < n:
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                logs.seek(0)
                raise RuntimeError(f"workers did not start: {logs.read()[-2000:]!r}")
            await asyncio.sleep(0.1)
        xid0 = int(await scalar(dsn, "SELECT txid_current()"))
        stop, waiting = asyncio.Event(), list[int]()
        sampler = asyncio.create_task(lock_waiters(dsn, stop, waiting))
        agent = make_agent()
        async with Journal(url) as journal:
            for start in range(0, runs, 100):
                await asyncio.gather(
                    *(
                        agent.submit(f"{prefix}{i:05d}", "go", journal=journal, spec=SPEC)
                        for i in range(start, min(runs, start + 100))
                    )
                )
        deadline = time.monotonic() + 600
        query = f"SELECT count(*) FROM bide_records WHERE key = 'end' AND run_id LIKE '{prefix}%'"
        while int(await scalar(dsn, query)) < runs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n} workers: runs did not end in time")
            await asyncio.sleep(0.2)
        stop.set()
        await sampler
        xid1 = int(await scalar(dsn, "SELECT txid_current()"))
        conn = await asyncpg.connect(dsn)
        try:
            ends = [
                int(r[0])
                for r in await conn.fetch(
                    "SELECT created_ms FROM bide_records WHERE key = 'end' "
                    f"AND run_id LIKE '{prefix}%' ORDER BY created_ms"
                )
            ]
        finally:
            await conn.close()
    finally:
        stop_workers(workers)
    lo, hi = ends[len(ends) // 10], ends[len(ends) * 9 // 10]
    middle = len(ends) * 9 // 10 - len(ends) // 10
    per_s = middle / max((hi - lo) / 1000, 1e-3)
    writes = (xid1 - xid0 - 1) / runs
    return {
        "workers": n,
        "runs": runs,
        "runs_per_s": per_s,
        "write_tx_per_run": writes,
        "write_tx_per_s": per_s * writes,
        "lock_waiters": statistics.mean(waiting) if waiting else 0.0,
        "load_before": load_before,
        "load_after": loadavg(),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=400, help="runs per point (default 400)")
    parser.add_argument("--concurrency", type=int, default=8, help="runs per worker at once")
    parser.add_argument("--raw-seconds", type=float, default=3.0)
    parser.add_argument("--json", help="write every point and raw rate to this file")
    parser.add_argument("--quick", action="store_true", help="a smoke test, not figures")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.runs, args.raw_seconds = 1, 60, 0.5
    admin = args.server.replace("postgresql+asyncpg://", "postgresql://")
    name = f"bide_bench_workers_{os.getpid()}"
    await scalar(admin, f"CREATE DATABASE {name}")
    url = sa.engine.make_url(admin).set(database=name).render_as_string(False)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; load average {loadavg()}")
    print(f"server: {sa.engine.make_url(admin).set(database=name).render_as_string()}")
    points: list[dict[str, Any]] = []
    raws: list[dict[str, Any]] = []
    try:
        async with Journal(url):
            pass  # migrated once, before any worker opens it
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(RAW_TABLE)
        finally:
            await conn.close()
        for r in range(args.rounds):
            raw = {
                "round": r,
                "raw_1": await raw_commit_rate(url, 1, args.raw_seconds),
                "raw_16": await raw_commit_rate(url, 16, args.raw_seconds),
                "load": loadavg(),
            }
            raws.append(raw)
            print(
                f"round {r}: raw commits/s {raw['raw_1']:.0f} on 1 connection, "
                f"{raw['raw_16']:.0f} on 16 (load {raw['load']})",
                flush=True,
            )
            for n in COUNTS if r % 2 == 0 else tuple(reversed(COUNTS)):
                p = await point(url, url, n, args.runs, args.concurrency)
                p["round"] = r
                points.append(p)
                print(
                    f"  {n:2d} workers: {p['runs_per_s']:7.1f} runs/s, "
                    f"{p['write_tx_per_run']:.1f} write tx/run, "
                    f"{p['lock_waiters']:.1f} waiting for the write lock "
                    f"(load {p['load_before']} -> {p['load_after']})",
                    flush=True,
                )
    finally:
        await scalar(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    table(points, raws)
    if args.json:
        write_json(args.json, {"points": points, "raw": raws, "machine": cpu_model()})


def write_json(path: str, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)


def table(points: list[dict[str, Any]], raws: list[dict[str, Any]]) -> None:
    by = {n: [p for p in points if p["workers"] == n] for n in COUNTS}
    med = {n: statistics.median(p["runs_per_s"] for p in ps) for n, ps in by.items() if ps}
    one = med.get(1)
    raw_1 = statistics.median(r["raw_1"] for r in raws)
    raw_16 = statistics.median(r["raw_16"] for r in raws)
    print()
    print(
        "| workers | runs/s (each round) | runs/s median | x 1 worker | of linear "
        "| write tx/run | write tx/s | sessions waiting for the write lock |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n, ps in by.items():
        if not ps:
            continue
        each = ", ".join(f"{p['runs_per_s']:.0f}" for p in ps)
        x = med[n] / one if one else float("nan")
        writes = statistics.median(p["write_tx_per_run"] for p in ps)
        waiters = statistics.median(p.get("lock_waiters", 0.0) for p in ps)
        print(
            f"| {n} | {each} | {med[n]:.0f} | {x:.2f} | {x / n:.2f} | {writes:.1f} "
            f"| {med[n] * writes:.0f} | {waiters:.1f} |"
        )
    print(f"\nraw commits/s: {raw_1:.0f} on 1 connection, {raw_16:.0f} on 16 (median of rounds)")


if __name__ == "__main__":
    asyncio.run(main())
