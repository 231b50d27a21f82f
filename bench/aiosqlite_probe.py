"""Would aiosqlite do the SQLite store's threads' work as fast? B1 and B3 both ways, one run.

Run: python bench/aiosqlite_probe.py (needs `pip install aiosqlite`; bide does not depend on it).
The store keeps one writer thread (group commit) and reader threads on the standard library's
driver. aiosqlite puts one standard-library connection on a thread of its own behind an async
API. Both sides here run the same SQL on the same file at WAL + synchronous=FULL:
- B1: one record per sequential append (a READ_ONLY call's result): the store's writer thread
  vs an aiosqlite connection running the statements the writer runs for it (BEGIN IMMEDIATE,
  the probe, the insert, the index touch, COMMIT), each one an await;
- B3: loading one run of 10,000 records among others into Records (header check, then the
  rows, decoded), store vs aiosqlite.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sqlite3

from runtime.journal import SQLiteStore
from runtime.records import Record
from runtime.store.codec import decode, encode
from runtime.store.decide import check_format
from runtime.store.sqlite import batch

PAYLOAD = {"value": "x" * 180}
LOAD = (
    "SELECT seq, key, kind, codec, payload, created_ms FROM bide_records "
    "WHERE run_id = ? AND seq > ? ORDER BY seq"
)
HEADER = "SELECT payload FROM bide_records WHERE run_id = ? AND key = 'header'"


async def b1_store(path: str, calls: int) -> float:
    async with await SQLiteStore.open(path) as store:
        run = f"s-{time.monotonic_ns()}"
        await store.create_run(run)
        t = time.perf_counter()
        for i in range(calls):
            await store.append(run, f"result/{i}/1", "result", PAYLOAD)
        return (time.perf_counter() - t) / calls


async def b1_aiosqlite(path: str, calls: int) -> float:
    import aiosqlite

    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = FULL")
        run = f"a-{time.monotonic_ns()}"
        async with await SQLiteStore.open(path) as store:
            await store.create_run(run)
        t = time.perf_counter()
        for i in range(calls):
            key, now = f"result/{i}/1", time.time_ns() // 1_000_000
            await conn.execute("BEGIN IMMEDIATE")
            async with conn.execute(batch.probe_sql(1), (run, key)) as cursor:
                found = await cursor.fetchall()
            seq = (found[0][0] or 0) + 1
            row = (seq, run, key, "result", "json", encode(PAYLOAD), now)
            await conn.execute(batch.insert_records_sql(1), row)
            await conn.execute(batch.touch_runs_sql(1), (now, run))
            await conn.execute("COMMIT")
        return (time.perf_counter() - t) / calls


async def b3_store(path: str, run: str) -> float:
    async with await SQLiteStore.open(path) as store:
        t = time.perf_counter()
        records = await store.load(run)
        elapsed = time.perf_counter() - t
        assert len(records) > 10_000
        return elapsed


async def b3_aiosqlite(path: str, run: str) -> float:
    import aiosqlite

    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("PRAGMA journal_mode = WAL")
        t = time.perf_counter()
        async with conn.execute(HEADER, (run,)) as cursor:
            (header,) = await cursor.fetchall()
        check_format(run, header[0])
        async with conn.execute(LOAD, (run, 0)) as cursor:
            rows = await cursor.fetchall()
        records = [
            Record(seq, run, key, kind, decode(codec, text, run_id=run, key=key), ms, codec)
            for seq, key, kind, codec, text, ms in rows
        ]
        elapsed = time.perf_counter() - t
        assert len(records) > 10_000
        return elapsed


async def main() -> None:
    try:
        import aiosqlite
    except ImportError:
        raise SystemExit("this probe needs aiosqlite: pip install aiosqlite") from None
    directory = tempfile.mkdtemp(prefix="bide-aiosqlite-")
    path = os.path.join(directory, "probe.db")
    async with await SQLiteStore.open(path) as store:
        for r in ("big", *(f"other-{i}" for i in range(5))):
            await store.create_run(r)
            await asyncio.gather(
                *(store.append(r, f"k{k}", "result", PAYLOAD) for k in range(10_000))
            )
    conn = sqlite3.connect(path)
    conn.close()
    print(f"aiosqlite {aiosqlite.__version__}, SQLite {sqlite3.sqlite_version}")
    rows = []
    for _ in range(5):  # interleaved, so both sides meet the same disk and load
        rows.append(
            (
                await b1_store(path, 300),
                await b1_aiosqlite(path, 300),
                await b3_store(path, "big"),
                await b3_aiosqlite(path, "big"),
            )
        )
    b1s, b1a, b3s, b3a = (statistics.median(col) for col in zip(*rows, strict=True))
    print(
        f"B1 per append: store {b1s * 1e6:.0f} us, aiosqlite {b1a * 1e6:.0f} us ({b1a / b1s:.2f}x)"
    )
    print(
        f"B3 10k load:   store {b3s * 1e3:.1f} ms, aiosqlite {b3a * 1e3:.1f} ms ({b3a / b3s:.2f}x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
