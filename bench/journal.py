"""B1 and B4 at the store level: the journal's cost per record pattern and its throughput.

Run: python bench/journal.py [--quick]. Ratios are against anchors measured in this same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors import RawSampler, bracket, header, measure, spread
from runtime.journal import SQLiteStore
from runtime.store import ops
from runtime.store.sqlite import writer

PAYLOAD = {"value": "x" * 180}


async def trivial_tool(i: int) -> dict[str, int]:
    return {"i": i}


async def direct(calls: int) -> float:
    t = time.perf_counter()
    for i in range(calls):
        await trivial_tool(i)
    return (time.perf_counter() - t) / calls


async def b1(path: str, calls: int, side_effect: bool) -> float:
    """Seconds per call of a trivial tool whose result (and side-effect marker) is journaled."""
    async with await SQLiteStore.open(path) as store:
        run = f"b1-{side_effect}-{time.monotonic_ns()}"
        await store.create_run(run)
        t = time.perf_counter()
        for i in range(calls):
            if side_effect:
                await store.append(run, f"attempt/{i}/1", "attempt", {"call_id": str(i)})
            value = await trivial_tool(i)
            await store.append(run, f"result/{i}/1", "result", {"value": value, **PAYLOAD})
        return (time.perf_counter() - t) / calls


async def b4(path: str, runs: int, records_per_run: int) -> tuple[float, int]:
    """Records per second with ``runs`` runs appending concurrently; and commits used."""
    async with await SQLiteStore.open(path) as store:
        prefix = f"b4-{time.monotonic_ns()}"

        async def one(r: int) -> None:
            run = f"{prefix}-{r}"
            await store.create_run(run)
            for k in range(records_per_run):
                await store.append(run, f"k{k}", "result", PAYLOAD)

        before = store.commits
        t = time.perf_counter()
        await asyncio.gather(*(one(r) for r in range(runs)))
        elapsed = time.perf_counter() - t
        return runs * (records_per_run + 1) / elapsed, store.commits - before


def _apply_nothing(conn: object, ops: list[ops.Op], now: int, limit: int) -> list[object]:
    """A writer batch that writes no row: what is left is the store and the thread hand-off."""
    out: list[object] = []
    for i, op in enumerate(ops):
        if isinstance(op, ops.AppendOp):
            out.append((True, False, i, op.kind, op.codec, op.payload, now))
        else:
            out.append(True if isinstance(op, ops.CreateOp) else None)
    return out


async def b4_handoff(path: str, runs: int, records_per_run: int) -> float:
    """B4 with every SQL statement of the writer skipped (BEGIN and COMMIT remain)."""
    real = writer.apply
    writer.apply = _apply_nothing
    try:
        rate, _ = await b4(path, runs, records_per_run)
    finally:
        writer.apply = real
    return rate


async def main(quick: bool) -> None:
    repeats = 5
    calls = 300 if quick else 1000
    runs = 1000 if quick else 5000
    anchors = measure()
    print(header(anchors))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")
        sampler = RawSampler(tmp)
        base = statistics.median([await direct(calls) for _ in range(repeats)])
        for side_effect, floor_commits, aim in ((False, 1, 2.0), (True, 2, 1.5)):
            costs, ratio = [], []
            for _ in range(repeats):
                before = sampler.sample()
                cost = (await b1(path, calls, side_effect) - base) * 1e6
                beside = bracket(before, sampler.sample()).commit_1_us
                costs.append(cost)
                ratio.append(cost / (beside * floor_commits))
            name = "SIDE_EFFECT (marker + result)" if side_effect else "READ_ONLY (result)"
            header_ratio = statistics.median(costs) / (anchors.commit_1_us * floor_commits)
            print(
                f"B1 {name}: {spread(costs)} us/call above a direct await; "
                f"x{header_ratio:.2f} of {floor_commits} raw commit(s) of the header, "
                f"x{statistics.median(ratio):.2f} of {floor_commits} warm raw commit(s) sampled"
                f" around each repetition (aim <= {aim})"
            )
        rates, commits, ratio = [], [], []
        for _ in range(repeats):
            before = sampler.sample()
            rate, used = await b4(path, runs, 4)
            rates.append(rate)
            commits.append(used)
            ratio.append(rate / bracket(before, sampler.sample()).rows_per_s_batched)
        print(
            f"B4 {runs} concurrent runs x 5 records: {spread([r / 1000 for r in rates])}"
            f" k records/s in ~{statistics.median(commits):.0f} commits;"
            f" x{statistics.median(rates) / anchors.rows_per_s_batched:.2f} of the header's raw"
            f" 100-row-batch rate, x{statistics.median(ratio):.2f} of the warm one sampled around"
            " each repetition (aim >= 0.4)"
        )
        handoff, floor_ratio = [], []
        for _ in range(repeats):
            before = sampler.sample()
            rate = await b4_handoff(path, runs, 4)
            handoff.append(rate)
            floor_ratio.append(rate / bracket(before, sampler.sample()).rows_per_s_batched)
        print(
            f"B4 floor of the design (same, the writer skipping its SQL): "
            f"{spread([r / 1000 for r in handoff])} k records/s; "
            f"x{statistics.median(handoff) / anchors.rows_per_s_batched:.2f} of the header's raw"
            f" rate, x{statistics.median(floor_ratio):.2f} of the warm one"
        )
    print(
        "not claimed: one machine, this disk, no network; B1 is the store alone (the agent loop"
        " adds its own records, see bench/agent.py)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls and runs")
    asyncio.run(main(parser.parse_args().quick))
