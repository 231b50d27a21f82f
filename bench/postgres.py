"""B1 and B4 on PostgreSQL: the journal's cost per call and its throughput, against raw asyncpg.

Run: python bench/postgres.py [--quick] [--server postgresql://postgres@127.0.0.1/test]. It makes
a database of its own on that server (dropped at the end). Anchors, measured in the same run and
interleaved with the measurements: one raw asyncpg single-row INSERT committed on its own, and
one raw 100-row INSERT committed in one transaction, into a table shaped like bide_records.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncpg
import sqlalchemy as sa

from runtime.journal.postgres import PostgresStore

PAYLOAD = {"value": "x" * 180}
ROW = '{"value": "' + "x" * 180 + '"}'
RAW_TABLE = (
    "CREATE TABLE raw (seq bigserial PRIMARY KEY, run_id text NOT NULL, key text NOT NULL, "
    "kind text NOT NULL, codec text NOT NULL, payload text NOT NULL, created_ms bigint NOT NULL, "
    "UNIQUE (run_id, key))"
)
INSERT = (
    "INSERT INTO raw (run_id, key, kind, codec, payload, created_ms) VALUES ($1,$2,$3,$4,$5,$6)"
)


async def raw_one(dsn: str, n: int) -> float:
    """Seconds per single-row INSERT committed on its own (autocommit)."""
    conn = await asyncpg.connect(dsn)
    try:
        tag = time.monotonic_ns()
        t = time.perf_counter()
        for i in range(n):
            await conn.execute(INSERT, f"r{tag}", f"k{i}", "result", "json", ROW, 0)
        return (time.perf_counter() - t) / n
    finally:
        await conn.close()


async def raw_batch(dsn: str, batches: int) -> float:
    """Rows per second, 100 rows per committed transaction."""
    conn = await asyncpg.connect(dsn)
    try:
        tag = time.monotonic_ns()
        t = time.perf_counter()
        for b in range(batches):
            rows = [(f"b{tag}-{b}", f"k{i}", "result", "json", ROW, 0) for i in range(100)]
            async with conn.transaction():
                await conn.executemany(INSERT, rows)
        return batches * 100 / (time.perf_counter() - t)
    finally:
        await conn.close()


async def b1(store: PostgresStore, calls: int, side_effect: bool) -> float:
    run = f"b1-{side_effect}-{time.monotonic_ns()}"
    await store.create_run(run)
    t = time.perf_counter()
    for i in range(calls):
        if side_effect:
            await store.append(run, f"attempt/{i}/1", "attempt", {"call_id": str(i)})
        value = {"i": i}
        await store.append(run, f"result/{i}/1", "result", {"value": value, **PAYLOAD})
    return (time.perf_counter() - t) / calls


async def b4(store: PostgresStore, runs: int, records: int) -> tuple[float, int]:
    prefix = f"b4-{time.monotonic_ns()}"
    before = store.commits

    async def one(r: int) -> None:
        run = f"{prefix}-{r}"
        await store.create_run(run)
        for k in range(records):
            await store.append(run, f"k{k}", "result", PAYLOAD)

    t = time.perf_counter()
    await asyncio.gather(*(one(r) for r in range(runs)))
    return runs * (records + 1) / (time.perf_counter() - t), store.commits - before


async def main(server: str, quick: bool) -> None:
    name = f"bide_bench_{os.getpid()}"
    admin = await asyncpg.connect(server)
    await admin.execute(f"CREATE DATABASE {name}")
    url = sa.engine.make_url(server).set(database=name).render_as_string(False)
    try:
        raw = await asyncpg.connect(url)
        await raw.execute(RAW_TABLE)
        version = await raw.fetchval("SHOW server_version")
        sync = await raw.fetchval("SHOW synchronous_commit")
        await raw.close()
        print(
            f"PostgreSQL {version} (synchronous_commit={sync}), asyncpg {asyncpg.__version__}, "
            f"SQLAlchemy {sa.__version__}, Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
        )
        calls, reps, runs = (200, 2, 500) if quick else (1000, 5, 5000)
        rows: dict[str, list[float]] = {k: [] for k in ("raw1", "ro", "se", "raw100", "b4")}
        commits = 0
        async with await PostgresStore.open(url, allow_foreign=True) as store:  # beside "raw"
            for _ in range(reps):
                rows["raw1"].append(await raw_one(url, calls))
                rows["ro"].append(await b1(store, calls, False))
                rows["se"].append(await b1(store, calls, True))
                rows["raw100"].append(await raw_batch(url, 50))
                rate, commits = await b4(store, runs, 4)
                rows["b4"].append(rate)
        med = {k: statistics.median(v) for k, v in rows.items()}
        us = 1e6
        print(
            f"raw one-row commit {med['raw1'] * us:.0f} us; "
            f"raw 100-row commits {med['raw100']:,.0f} rows/s"
        )
        print(
            f"B1 READ_ONLY  {med['ro'] * us:.0f} us per call: "
            f"x{med['ro'] / med['raw1']:.2f} of one raw commit (aim <= 1.5)"
        )
        print(
            f"B1 SIDE_EFFECT {med['se'] * us:.0f} us per call: "
            f"x{med['se'] / (2 * med['raw1']):.2f} of two raw commits"
        )
        print(
            f"B4 {runs:,} runs x 5 records: {med['b4']:,.0f} records/s, "
            f"x{med['b4'] / med['raw100']:.2f} of the raw 100-row rate (aim >= 0.4); "
            f"{commits} commits in the last repetition"
        )
        print(
            f"medians of {reps}; ranges: "
            + ", ".join(
                f"{k} {min(v) * (us if k in ('raw1', 'ro', 'se') else 1):,.0f}-"
                f"{max(v) * (us if k in ('raw1', 'ro', 'se') else 1):,.0f}"
                for k, v in rows.items()
            )
        )
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    asyncio.run(main(args.server, args.quick))
