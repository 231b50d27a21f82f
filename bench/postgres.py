"""B1, B2 and B4 on PostgreSQL, against raw asyncpg; and payloads as JSON text against JSONB.

Run: python bench/postgres.py [--quick] [--only b1,b4,b2,jsonb] [--server postgresql://...]. It
makes databases of its own on that server (dropped at the end). Anchors, measured in the same run
and interleaved with the measurements: one raw asyncpg single-row INSERT committed on its own,
and one raw 100-row INSERT committed in one transaction, into a table shaped like bide_records.
B2 runs each sample in a fresh process (``bench/agent.py``'s child) on a fresh database, beside
the asyncio floor of the same workload.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncpg
import sqlalchemy as sa

from bench.agent import run_b2_child
from bench.anchors import cpu_model
from runtime.store.postgres import PostgresStore

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


# --- payloads: JSON text or JSONB ---------------------------------------------------------------

PAD = "p" * 380


def jsonb_rows(n: int, tag: str) -> list[tuple[Any, ...]]:
    """Rows shaped like bide's records, ~500 bytes of JSON each (B3's size)."""
    return [
        (
            tag,
            f"k{i}",
            "result",
            "json",
            json.dumps({"call_id": f"c{i}", "outcome": "value", "value": {"i": i}, "pad": PAD}),
            0,
        )
        for i in range(n)
    ]


async def jsonb_round(url: str, n_one: int, batches: int, read: int) -> dict[str, float]:
    """One interleaved round of each payload type: single-row commits (s), 100-row commits
    (rows/s), and reading then decoding ``read`` rows of one run in seq order (s)."""
    out: dict[str, float] = {}
    conn = await asyncpg.connect(url)
    try:
        for kind in ("text", "jsonb"):
            table = f"p_{kind}"
            insert = (
                f"INSERT INTO {table} (run_id, key, kind, codec, payload, created_ms) "
                f"VALUES ($1,$2,$3,$4,$5::{kind},$6)"
            )
            tag = f"{kind}-{time.monotonic_ns()}"
            rows = jsonb_rows(n_one, tag + "-1")
            t = time.perf_counter()
            for row in rows:
                await conn.execute(insert, *row)
            out[f"{kind}_one"] = (time.perf_counter() - t) / n_one
            t = time.perf_counter()
            for b in range(batches):
                async with conn.transaction():
                    await conn.executemany(insert, jsonb_rows(100, f"{tag}-b{b}"))
            out[f"{kind}_100"] = batches * 100 / (time.perf_counter() - t)
            run = f"{tag}-read"
            async with conn.transaction():
                await conn.executemany(insert, jsonb_rows(read, run))
            select = (
                f"SELECT seq, key, kind, codec, payload::text, created_ms FROM {table} "
                "WHERE run_id = $1 ORDER BY seq"
            )
            t = time.perf_counter()
            got = await conn.fetch(select, run)
            decoded = [json.loads(r[4]) for r in got]
            out[f"{kind}_read"] = time.perf_counter() - t
            assert len(decoded) == read
    finally:
        await conn.close()
    return out


async def bench_jsonb(url: str, reps: int, quick: bool) -> None:
    conn = await asyncpg.connect(url)
    try:
        for kind in ("text", "jsonb"):
            await conn.execute(
                RAW_TABLE.replace("raw", f"p_{kind}").replace("payload text", f"payload {kind}")
            )
    finally:
        await conn.close()
    n_one, batches, read = (200, 20, 2000) if quick else (1000, 50, 10000)
    rounds = [await jsonb_round(url, n_one, batches, read) for _ in range(reps)]
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    conn = await asyncpg.connect(url)
    try:
        size = {
            kind: await conn.fetchval(f"SELECT pg_total_relation_size('p_{kind}')")
            / await conn.fetchval(f"SELECT count(*) FROM p_{kind}")
            for kind in ("text", "jsonb")
        }
    finally:
        await conn.close()
    us = 1e6
    print(
        f"payloads (~500 B of JSON per row), medians of {reps}: "
        f"one-row commit text {med['text_one'] * us:.0f} us, jsonb {med['jsonb_one'] * us:.0f} us "
        f"(x{med['jsonb_one'] / med['text_one']:.2f}); 100-row commits text "
        f"{med['text_100']:,.0f} rows/s, jsonb {med['jsonb_100']:,.0f} "
        f"(x{med['jsonb_100'] / med['text_100']:.2f}); read + json.loads of {read:,} rows text "
        f"{med['text_read'] * 1e3:.1f} ms, jsonb {med['jsonb_read'] * 1e3:.1f} ms "
        f"(x{med['jsonb_read'] / med['text_read']:.2f}); on disk text {size['text']:.0f} B/row, "
        f"jsonb {size['jsonb']:.0f} B/row"
    )
    print(
        "  ranges: "
        + ", ".join(
            f"{k} {min(r[k] for r in rounds) * _unit(k):,.0f}-"
            f"{max(r[k] for r in rounds) * _unit(k):,.0f}"
            for k in rounds[0]
        )
    )


def _unit(key: str) -> float:
    """us for one-row commits, ms for reads, rows/s as they are."""
    return 1e6 if key.endswith("one") else 1e3 if key.endswith("read") else 1.0


# --- B2: many runs in one process ------------------------------------------------------------


def _growth(sample: dict[str, Any], runs: int) -> float:
    return float(sample["peak_rss_kb"] - sample["base_rss_kb"]) / runs


async def bench_b2(server: str, name: str, runs: int, reps: int) -> None:
    """Interleaved per repetition, same seed: the asyncio floor, the 7 records per run through
    the store alone, and the agent (what B2 judges), each a fresh process on a fresh database."""
    template = f"{name}_b2t"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f"CREATE DATABASE {template}")
        url = sa.engine.make_url(server).set(database=template).render_as_string(False)
        await (await PostgresStore.open(url)).close()
        samples: dict[str, list[dict[str, Any]]] = {"floor": [], "store": [], "agent": []}
        for rep in range(reps):
            for mode, got in samples.items():
                if mode == "floor":  # no journal at all
                    got.append(await asyncio.to_thread(run_b2_child, mode, runs, 1000 + rep, "."))
                    continue
                db = f"{name}_b2_{rep}_{mode}"
                await admin.execute(f"CREATE DATABASE {db} TEMPLATE {template}")
                try:
                    target = sa.engine.make_url(server).set(database=db).render_as_string(False)
                    got.append(
                        await asyncio.to_thread(run_b2_child, mode, runs, 1000 + rep, target)
                    )
                finally:
                    await admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
        await admin.close()
    for mode, rows in samples.items():
        walls = [r["wall"] for r in rows]
        line = (
            f"B2 {runs:,} runs {mode:5}: wall {statistics.median(walls) * 1e3:,.0f} ms "
            f"({min(walls) * 1e3:,.0f}-{max(walls) * 1e3:,.0f}); "
            f"{statistics.median([runs / w for w in walls]):,.0f} runs/s"
        )
        if mode != "floor":
            line += (
                f", {statistics.median([r['records'] / r['wall'] for r in rows]):,.0f} records/s"
                f" ({rows[0]['records'] // runs} per run); latency mean "
                f"{statistics.median([r['latency_mean'] for r in rows]) * 1e3:,.0f} ms, p99 "
                f"{statistics.median([r['latency_p99'] for r in rows]) * 1e3:,.0f} ms; "
                f"peak RSS +{statistics.median([_growth(r, runs) for r in rows]):.1f} KB/run; "
                f"{statistics.median([r['commits'] for r in rows]):,.0f} commits; "
                f"errors {sum(r['errors'] for r in rows)}"
            )
            first = next((r["first_error"] for r in rows if r["first_error"]), None)
            if first:
                line += f"; first error: {first}"
        print(line, flush=True)
    for mode in ("store", "agent"):
        ratios = [
            a["wall"] / f["wall"] for a, f in zip(samples[mode], samples["floor"], strict=True)
        ]
        print(
            f"B2 {runs:,} runs {mode}: wall x{statistics.median(ratios):.2f} of the asyncio floor "
            f"(paired, min {min(ratios):.2f}, max {max(ratios):.2f})"
            + (" (aim <= 2.0)" if mode == "agent" else ""),
            flush=True,
        )


async def main(server: str, quick: bool, only: set[str]) -> None:
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
            f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} "
            "at the start"
        )
        calls, reps, runs = (200, 2, 500) if quick else (1000, 5, 5000)
        if "jsonb" in only:
            await bench_jsonb(url, reps, quick)
        if "b2" in only:
            await bench_b2(server, name, 1000 if quick else 5000, 2 if quick else 5)
        if not only & {"b1", "b4"}:
            return
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
        print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="b1,b4,b2,jsonb", help="comma-separated")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    asyncio.run(main(args.server, args.quick, set(args.only.split(","))))
