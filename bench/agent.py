"""B1 through the agent, B2 and B3 of BENCHMARKS.md: the journal as an agent run pays for it.

Run: python bench/agent.py [--quick] [--only b1,b2,b3]. Anchors are measured first, in this same
run, and every result is printed as a ratio to them or to a floor measured beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import structlog

from bench.anchors import Anchors, RawSampler, bracket, header, measure, spread
from runtime import Agent, AssistantTurn, Journal, Safety, ToolCall, ToolContext, tool
from runtime import loop as runtime_loop
from runtime.functions import FunctionTool
from runtime.holding import Holding
from runtime.messages import Message, UserMessage
from runtime.ownership import Lease
from runtime.state import RunState
from runtime.store.codec import encode
from runtime.testing import MemoryStore, ScriptedModel
from runtime.tools import ToolSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The library never configures logging; a benchmark may, as an application would: drop info
# events and cache each module's logger on first use (else every call re-binds a proxy).
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    cache_logger_on_first_use=True,
)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread_ms(seconds: Sequence[float]) -> str:
    return spread([x * 1e3 for x in seconds])


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def make_echo(safety: Safety) -> FunctionTool:
    @tool(safety=safety)
    async def echo(i: int) -> dict[str, int]:
        """Return its argument: the trivial tool whose journal cost B1 measures."""
        return {"i": i}

    return echo


# --- B1 through the agent ----------------------------------------------------------------------


async def direct(echo: FunctionTool, calls: int) -> float:
    """Seconds per direct ``await`` of the tool's own ``call`` (validation included)."""
    context = ToolContext(run_id="direct", call_id="c", tool_name="echo")
    t = time.perf_counter()
    for i in range(calls):
        await echo.call({"i": i}, context)
    return (time.perf_counter() - t) / calls


def b1_script(calls: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "arguments": {"i": i}}]}
        for i in range(calls)
    ]
    return [*turns, {"text": "done"}]


class TimedModel:
    """Wraps a model and adds up the time spent in it (the model's cost is not the runtime's)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.seconds = 0.0

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        t = time.perf_counter()
        try:
            turn: AssistantTurn = await self.inner.complete(system_prompt, messages, tools)
            return turn
        finally:
            self.seconds += time.perf_counter() - t


async def b1_agent(
    path: str, calls: int, safety: Safety, script: list[dict[str, Any]]
) -> tuple[float, float]:
    """One run of ``calls`` sequential calls journaled at FULL: seconds per call, and of them
    the seconds spent inside the scripted model."""
    model = TimedModel(ScriptedModel(script))
    agent = Agent(model=model, tools=[make_echo(safety)], max_turns=calls + 1)
    async with Journal(path) as journal:
        run = f"b1-{safety.value}-{time.monotonic_ns()}"
        t = time.perf_counter()
        result = await agent.run(run, "go", journal=journal)
        elapsed = time.perf_counter() - t
    assert result.status.value == "completed", result
    return elapsed / calls, model.seconds / calls


async def bench_b1(anchors: Anchors, tmp: str, calls: int, repeats: int) -> list[str]:
    sampler = RawSampler(tmp)
    script = b1_script(calls)
    path = os.path.join(tmp, "b1.db")
    async with Journal(path):
        pass  # migrate once, outside the timing
    summary = []
    for safety, records, floor, aim in (
        (Safety.READ_ONLY, 2, 1, 2.0),
        (Safety.SIDE_EFFECT, 3, 2, 1.5),
    ):
        echo = make_echo(safety)
        base = median([await direct(echo, calls) for _ in range(repeats)])
        costs, models, commits = [], [], []
        for _ in range(repeats):
            before = sampler.sample()
            per_call, in_model = await b1_agent(path, calls, safety, script)
            costs.append((per_call - in_model - base) * 1e6)
            models.append(in_model * 1e6)
            commits.append(bracket(before, sampler.sample()).commit_1_us)
        # Each repetition against the raw commit measured around it (the disk drifts).
        one = median([c / r for c, r in zip(costs, commits, strict=True)])
        what = "turn + result" if records == 2 else "turn + marker + result"
        head = median(costs) / anchors.commit_1_us
        line = (
            f"B1-agent {safety.value}: {spread(costs)} us/call above a direct await "
            f"({base * 1e6:.1f} us), not counting {median(models):.0f} us/call inside "
            f"ScriptedModel; {records} records per call ({what}). Against the header's raw "
            f"commit: x{head:.2f} of 1, x{head / records:.2f} of {records}, x{head / floor:.2f} "
            f"of the BENCHMARKS floor of {floor} (aim <= {aim}). Against the warm raw commit "
            f"sampled around each repetition ({median(commits):.0f} us): x{one:.2f} of 1, "
            f"x{one / records:.2f} of {records}, x{one / floor:.2f} of the floor"
        )
        print(line, flush=True)
        summary.append(line)
    return summary


# --- B2: many runs in one process -------------------------------------------------------------

RECORDS_PER_B2_RUN = 7
"""header, start, turn 1, attempt marker, result, turn 2, end."""


def b2_delays(runs: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(0.1 * rng.uniform(0.5, 1.5), 0.1 * rng.uniform(0.5, 1.5)) for _ in range(runs)]


FIRST = AssistantTurn(
    tool_calls=(ToolCall("c1", "act", {"n": 1}),), finish_reason="tool_calls", text=None
)
FINAL = AssistantTurn(text="done")


class SleepyModel:
    """Sleeps the run's seeded delay for this turn, then asks for ``act`` once, then answers."""

    def __init__(self, delays: Mapping[str, tuple[float, float]]):
        self.delays = delays

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        first = messages[0]
        assert isinstance(first, UserMessage)
        n = sum(isinstance(m, AssistantTurn) for m in messages)
        await asyncio.sleep(self.delays[first.text][n])
        return FIRST if n == 0 else FINAL


@tool
async def act(n: int) -> dict[str, int]:
    """A SIDE_EFFECT that does nothing: B2 measures the journal, not the tool."""
    return {"acted": n}


class GCClock:
    """Wall time spent in the cyclic garbage collector, by gc.callbacks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.full += info["generation"] == 2


def rss_kb() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in KB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value = line.split(":")
                values[name] = int(value.split()[0])
    return values["VmRSS"], values["VmHWM"]


def b2_target(where: str, runs: int) -> str:
    """The journal of a B2 sample: a file in the directory ``where``, or ``where`` itself when it
    is a PostgreSQL URL (``bench/postgres.py`` gives each sample a fresh database)."""
    if where.startswith(("postgresql://", "postgresql+asyncpg://")):
        return where
    return os.path.join(where, f"b2-{runs}.db")


async def count_records(target: str) -> int:
    if not target.startswith("postgresql"):
        with sqlite3.connect(target) as conn:
            return int(conn.execute("SELECT count(*) FROM bide_records").fetchone()[0])
    import asyncpg

    conn = await asyncpg.connect(target.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM bide_records"))
    finally:
        await conn.close()


async def b2_child(mode: str, runs: int, seed: int, tmp: str) -> dict[str, Any]:
    """One B2 sample, in a fresh process so that its peak RSS is its own. ``tmp`` is a scratch
    directory for a SQLite journal, or a PostgreSQL URL."""
    target = b2_target(tmp, runs)
    base_rss, _ = rss_kb()
    delays = b2_delays(runs, seed)
    inputs = [f"run-{i}" for i in range(runs)]
    journal = None
    if mode == "floor":
        context = ToolContext(run_id="floor", call_id="c1", tool_name="act")

        async def one(i: int) -> None:
            d1, d2 = delays[i]
            await asyncio.sleep(d1)
            await act.call({"n": 1}, context)
            await asyncio.sleep(d2)

    elif mode == "store":
        # The same seven records per run through the Store alone: the journal without the loop.
        journal = await Journal(target).open()
        store = journal.store
        turn1 = {"n": 1, "turn": FIRST.to_json(), "plan": {"c1": {"safety": "side_effect"}}}
        marker = {"call_id": "c1", "attempt": 1, "tool": "act", "safety": "side_effect"}
        turn2 = {"n": 2, "turn": FINAL.to_json(), "plan": {}}

        async def one(i: int) -> None:
            run, d1, d2 = f"r{i}", *delays[i]
            await store.create_run(run, agent="b2")
            await store.append(run, "start", "start", {"input": inputs[i]}, watch="cancel")
            await asyncio.sleep(d1)
            await store.append(run, "turn/1", "turn", turn1, unless="cancel", watch="cancel")
            await store.append(run, "attempt/c1/1", "attempt", marker, unless="cancel")
            value = await act.call({"n": 1}, None)
            result = {**marker, "outcome": "value", "value": value}
            await store.append(run, "result/c1/1", "result", result, watch="cancel")
            await asyncio.sleep(d2)
            await store.append(run, "turn/2", "turn", turn2, unless="cancel", index={"turns": 2})
            await store.append(run, "end", "end", {"status": "completed"}, index={"status": "ok"})

    else:
        agent = Agent(model=SleepyModel(dict(zip(inputs, delays, strict=True))), tools=[act])
        if mode == "unleased":
            # What ownership costs: the same drive with its lease a no-op (the bench alone).
            runtime_loop.Holding = _Unowned  # type: ignore[misc]
        if mode == "memory":
            journal = await Journal(store=MemoryStore(check=False)).open()
        else:
            journal = await Journal(target).open()

        async def one(i: int) -> None:
            assert journal is not None
            result = await agent.run(f"r{i}", inputs[i], journal=journal)
            if result.status.value != "completed":
                raise RuntimeError(f"run r{i} ended {result.status.value}")

    setup_rss, _ = rss_kb()
    done: list[float] = [0.0] * runs

    async def timed(i: int) -> None:
        await one(i)
        done[i] = time.perf_counter()

    commits_before = journal.store.commits if journal else 0
    clock = GCClock()
    gc.callbacks.append(clock)
    cpu0, main0 = time.process_time(), time.thread_time()
    t0 = time.perf_counter()
    outcomes = await asyncio.gather(*(timed(i) for i in range(runs)), return_exceptions=True)
    wall = time.perf_counter() - t0
    cpu, main_cpu = time.process_time() - cpu0, time.thread_time() - main0
    gc.callbacks.remove(clock)
    _, peak = rss_kb()
    errors = [f"{type(o).__name__}: {o}" for o in outcomes if isinstance(o, BaseException)]
    records = 0
    commits = 0
    if journal is not None and mode != "memory":
        commits = journal.store.commits - commits_before
        await journal.close()
        records = await count_records(target)
    latencies = [d - t0 for d in done if d]
    return {
        "wall": wall,
        "gc": clock.seconds,
        "gc_full": clock.full,
        "cpu": cpu,
        "main_cpu": main_cpu,
        "latency_mean": statistics.fmean(latencies) if latencies else 0.0,
        "latency_p99": pct(latencies, 0.99) if latencies else 0.0,
        "base_rss_kb": base_rss,
        "setup_rss_kb": setup_rss,
        "peak_rss_kb": peak,
        "commits": commits,
        "records": records,
        "errors": len(errors),
        "locked": sum("locked" in e for e in errors),
        "first_error": errors[0] if errors else None,
    }


def run_b2_child(mode: str, runs: int, seed: int, tmp: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--b2-child", mode, str(runs), str(seed), tmp],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"B2 child {mode} {runs} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


B2_MODES = {
    "floor": "asyncio floor: sleep, call the tool, sleep; no agent, no journal",
    "memory": "the agent loop on an in-memory store: the loop's own cost, no journal",
    "store": "the same 7 records per run through the Store alone, no agent loop",
    "unleased": "the agent on a journal at FULL, without run ownership (no lease, no fencing)",
    "agent": "the agent on a journal at FULL: what B2 judges",
}


class _Unowned(Holding):
    """A drive's lease that does nothing: prices ownership in B2 (``agent`` / ``unleased``)."""

    async def acquire(self, *, wait: float | None = None) -> Lease:
        self.lease = None
        return None  # type: ignore[return-value]

    @property
    def epoch(self) -> Any:
        return None

    def check(self) -> None:
        return None

    async def release(self) -> None:
        return None


def bench_b2(tmp: str, sizes: Sequence[int], repeats: int) -> list[str]:
    summary = []
    aims = {5000: 1.3, 10000: 1.5}
    for mode, what in B2_MODES.items():
        print(f"B2 mode {mode}: {what}", flush=True)
    for runs in sizes:
        samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in B2_MODES}
        for rep in range(repeats):
            # Interleaved, same seed per repetition: each set sees the same delays and noise.
            for mode in samples:
                with tempfile.TemporaryDirectory(dir=tmp) as sub:
                    samples[mode].append(run_b2_child(mode, runs, 1000 + rep, sub))
        for mode, rows in samples.items():
            walls = [r["wall"] for r in rows]
            growth = [(r["peak_rss_kb"] - r["base_rss_kb"]) / runs for r in rows]
            line = (
                f"B2 {runs:>5} runs {mode:6}: wall {spread_ms(walls)} ms; "
                f"{median([runs / w for w in walls]):,.0f} runs/s"
            )
            if mode in ("store", "unleased", "agent"):
                line += (
                    f", {median([r['records'] / r['wall'] for r in rows]):,.0f} records/s"
                    f" ({rows[0]['records'] // runs} per run)"
                )
            line += (
                f"; cyclic GC {median([r['gc'] for r in rows]) * 1e3:.0f} ms"
                f" ({median([r['gc_full'] for r in rows]):.0f} full)"
                f"; latency mean {median([r['latency_mean'] for r in rows]) * 1e3:.0f} ms"
                f", p99 {median([r['latency_p99'] for r in rows]) * 1e3:.0f} ms"
                f"; CPU main {median([r['main_cpu'] for r in rows]) * 1e6 / runs:.0f} us/run"
                f", other threads"
                f" {median([r['cpu'] - r['main_cpu'] for r in rows]) * 1e6 / runs:.0f} us/run"
                f"; peak RSS +{median(growth):.1f} KB/run"
            )
            if mode in ("store", "unleased", "agent"):
                line += (
                    f"; {median([r['commits'] for r in rows]):.0f} commits"
                    f"; errors {sum(r['errors'] for r in rows)}"
                    f" (database is locked: {sum(r['locked'] for r in rows)})"
                )
            first = next((r["first_error"] for r in rows if r["first_error"]), None)
            if first:
                line += f"; first error: {first}"
            print(line, flush=True)
        pairs = zip(samples["agent"], samples["unleased"], strict=True)
        leased = [a["wall"] / u["wall"] for a, u in pairs]
        line = (
            f"B2 {runs:>5} runs ownership: agent wall x{median(leased):.2f} of the same without "
            f"leases (paired, min {min(leased):.2f}, max {max(leased):.2f}) (aim <= 1.1)"
        )
        print(line, flush=True)
        summary.append(line)
        for mode in ("store", "agent"):
            pairs = zip(samples[mode], samples["floor"], strict=True)
            ratios = [a["wall"] / f["wall"] for a, f in pairs]
            growth = [(r["peak_rss_kb"] - r["base_rss_kb"]) / runs for r in samples[mode]]
            aim = aims.get(runs) if mode == "agent" else None
            line = (
                f"B2 {runs:>5} runs {mode}: wall x{median(ratios):.2f} of the asyncio floor "
                f"(paired, min {min(ratios):.2f}, max {max(ratios):.2f})"
                + (f" (aim <= {aim})" if aim else "")
                + f"; peak RSS +{median(growth):.1f} KB/run above post-import"
                + (" (aim <= 4)" if mode == "agent" else "")
            )
            print(line, flush=True)
            summary.append(line)
    return summary


# --- B3: resume cost as the journal grows -----------------------------------------------------

PAD = "p" * 380
"""Pads each B3 record to about 500 bytes of JSON."""


def b3_payloads(records: int) -> list[tuple[str, str, Any]]:
    """(key, kind, payload) of a run of ``records`` records, header excluded: a start, then
    READ_ONLY calls as turn + result pairs."""
    out: list[tuple[str, str, Any]] = [
        ("start", "start", {"input": "go", "agent": "b3", "spec": None, "pad": PAD})
    ]
    n = 0
    while len(out) < records - 1:
        n += 1
        call = {"id": f"c{n}", "name": "echo", "arguments": {"i": n}}
        turn = {"text": PAD, "tool_calls": [call], "usage": {}, "finish_reason": "tool_calls"}
        plan = {f"c{n}": {"safety": "read_only", "approval": None}}
        out.append((f"turn/{n}", "turn", {"n": n, "turn": turn, "plan": plan}))
        if len(out) < records - 1:
            value = {"call_id": f"c{n}", "attempt": 1, "tool": "echo", "safety": "read_only"}
            out.append((f"result/c{n}/1", "result", {**value, "outcome": "value", "value": PAD}))
    return out


async def b3_build(path: str, sizes: Sequence[int], others: int) -> None:
    """One file holding a run of each size, interleaved with ``others`` runs of filler."""
    async with Journal(path) as journal:
        for size in sizes:
            await journal.store.create_run(f"b3-{size}")
        for o in range(others):
            await journal.store.create_run(f"other-{o}")
    bodies = {f"b3-{size}": b3_payloads(size) for size in sizes}
    filler = max(sizes)
    for o in range(others):
        bodies[f"other-{o}"] = b3_payloads(filler)
    rows = []
    now = time.time_ns() // 1_000_000
    longest = max(len(b) for b in bodies.values())
    for i in range(longest):  # round robin: every run's rows are scattered through the file
        for run, body in bodies.items():
            if i < len(body):
                key, kind, payload = body[i]
                rows.append((run, key, kind, "json", encode(payload), now))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()


def b3_floor(path: str, run_id: str) -> tuple[float, int]:
    """The standard library reading and decoding the run's rows: seconds, rows."""
    t = time.perf_counter()
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT seq, key, kind, codec, payload, created_ms FROM bide_records "
        "WHERE run_id = ? ORDER BY seq",
        (run_id,),
    ).fetchall()
    decoded = [(seq, key, kind, json.loads(payload), ms) for seq, key, kind, _, payload, ms in rows]
    conn.close()
    return time.perf_counter() - t, len(decoded)


async def b3_replay(path: str, run_id: str) -> tuple[float, float, int]:
    """In-process replay on a freshly opened journal: (load seconds, fold seconds, records)."""
    async with Journal(path, migrate=False) as journal:
        t = time.perf_counter()
        assert await journal.store.check_run(run_id)
        records = await journal.store.load(run_id)
        t_load = time.perf_counter()
        state = RunState.fold(run_id, records)
        t_fold = time.perf_counter()
    assert state.start is not None
    return t_load - t, t_fold - t_load, len(records)


REPLAY_SCRIPT = """
import time
t0 = time.perf_counter()
import asyncio, sys
from runtime import Journal
t1 = time.perf_counter()

async def main(path, run_id):
    journal = await Journal(path, migrate=False).open()
    t2 = time.perf_counter()
    state = await journal.state(run_id)
    t3 = time.perf_counter()
    await journal.close()
    t4 = time.perf_counter()
    assert state is not None and len(state.records) == int(sys.argv[3])
    print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def process_seconds(args: Sequence[str]) -> tuple[float, str]:
    """Wall seconds of ``python *args`` from spawn to exit, and what it printed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args], check=True, env=env, capture_output=True, text=True
    )
    return time.perf_counter() - t, out.stdout


def import_time_ms(module: str) -> tuple[float, list[tuple[str, float]]]:
    """Total of ``python -X importtime -c 'import module'``, and its self time by top package."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stderr
    by_package: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            package = m.group(2).split(".")[0]
            by_package[package] = by_package.get(package, 0) + int(m.group(1))
    total = sum(by_package.values())
    heavy = sorted(by_package.items(), key=lambda kv: -kv[1])[:8]
    return total / 1000, [(n, us / 1000) for n, us in heavy]


async def bench_b3(tmp: str, sizes: Sequence[int], repeats: int) -> list[str]:
    path = os.path.join(tmp, "b3.db")
    await b3_build(path, sizes, others=3)
    summary = []
    floors: dict[int, float] = {}
    for size in sizes:
        run_id = f"b3-{size}"
        floor, rows = [], 0
        loads, folds, totals = [], [], []
        for _ in range(repeats):
            f, rows = b3_floor(path, run_id)
            floor.append(f * 1e3)
            load, fold, n = await b3_replay(path, run_id)
            assert n == rows == size, (n, rows, size)
            loads.append(load * 1e3)
            folds.append(fold * 1e3)
            totals.append((load + fold) * 1e3)
        floors[size] = median(floor)
        ratio = median(totals) / median(floor)
        line = (
            f"B3 replay {size:>6} records: {spread(totals)} ms (load+decode "
            f"{median(loads):.1f}, fold {median(folds):.1f}); stdlib floor {spread(floor)} ms; "
            f"x{ratio:.2f} of the floor"
            + (" (aim <= 1.25)" if size == max(sizes) else "")
            + f"; {median(totals) * 1e3 / size:.1f} us/record"
        )
        print(line, flush=True)
        summary.append(line)
    total, heavy = import_time_ms("runtime")
    line = "B3 python -X importtime -c 'import runtime': {:.0f} ms total; heaviest: {}".format(
        total, ", ".join(f"{n} {ms:.0f} ms" for n, ms in heavy)
    )
    print(line, flush=True)
    summary.append(line)
    bare = [process_seconds(["-c", "import sqlite3"])[0] * 1e3 for _ in range(repeats)]
    for size in sizes:
        run_id = f"b3-{size}"
        proc, parts = [], []
        for _ in range(repeats):
            seconds, printed = process_seconds(["-c", REPLAY_SCRIPT, path, run_id, str(size)])
            proc.append(seconds * 1e3)
            parts.append([float(x) * 1e3 for x in printed.split()])
        budget = median(bare) + floors[size]
        imports, opening, replay, closing = (median([p[i] for p in parts]) for i in range(4))
        line = (
            f"B3 process {size:>6} records (python -c: import, open, replay; the CLI's "
            f"`resume` is bench/startup.py's): {spread(proc)} ms (import runtime "
            f"{imports:.0f}, open {opening:.0f}, replay {replay:.0f}, close {closing:.0f}, "
            "the rest is interpreter start and exit); bare "
            f"`python -c 'import sqlite3'` {median(bare):.0f} ms + floor {floors[size]:.1f} ms; "
            f"x{median(proc) / budget:.2f} (aim <= 2.5)"
        )
        print(line, flush=True)
        summary.append(line)
    return summary


# --- main ---------------------------------------------------------------------------------------


async def main(quick: bool, only: set[str]) -> None:
    repeats = 3 if quick else 5
    anchors = measure()
    print(header(anchors), flush=True)
    if quick:
        print("(--quick: fewer repeats and sizes; a smoke test, not figures)", flush=True)
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if "b1" in only:
            summary += await bench_b1(anchors, tmp, 300 if quick else 1000, repeats)
        if "b2" in only:
            summary += bench_b2(tmp, (1000, 5000) if quick else (1000, 5000, 10000), repeats)
        if "b3" in only:
            summary += await bench_b3(tmp, (100, 1000, 10000), repeats)
    print("\nratios (same run):")
    for line in summary:
        print("  " + line)
    print(
        "\nnot claimed: a scripted or sleeping model, no network, one process, this disk and this"
        " shared 2-core machine; tools do nothing, so B1/B2 are the runtime's own cost; B3's"
        " process figure times `python -c` opening the journal and replaying (bench/startup.py"
        " times `python -m runtime resume`); crash-safety is proven by the crash"
        " tests, not here."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    parser.add_argument("--only", default="b1,b2,b3", help="comma-separated: b1,b2,b3")
    parser.add_argument("--b2-child", nargs=4, metavar=("MODE", "RUNS", "SEED", "TMP"))
    args = parser.parse_args()
    if args.b2_child:
        mode, runs, seed, tmp = args.b2_child
        print(json.dumps(asyncio.run(b2_child(mode, int(runs), int(seed), tmp))))
    else:
        asyncio.run(main(args.quick, set(args.only.split(","))))
