"""Issue 15's table for bide, every row in one run, each beside its anchor and its goal.

Run: python bench/steps.py [--quick] [--only conc,step,resume] [--repeats N]. The machine line
and the raw anchors come first (`bench/anchors.py`); every row is measured interleaved with its
baseline (plain asyncio, plain awaits, or the raw commit sampled just before and after it), and
the table at the end gives the median and the min-max over the repetitions. The agents are in
`bench/workload.py`; `bench/README.md` says exactly what each row counts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import structlog

from bench import resume, workload
from bench.agent import GCClock
from bench.anchors import RawSampler, bracket, header, measure
from bench.table import Row, met, render, span
from bench.workload import child_env
from runtime import (
    Journal,
    Message,
    RunStatus,
    Safety,
    ToolContext,
    ToolResultMessage,
    UserMessage,
)
from runtime.testing import MemoryStore

# As bench/agent.py (and a service) would: drop info events, cache each module's logger.
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    cache_logger_on_first_use=True,
)


def child(*args: str) -> dict[str, Any]:
    """One sample in a fresh process (this file with ``--child``): its JSON line."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {args} exited {out.returncode}:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- row 1: many runs at once ----------------------------------------------------------------


async def conc_child(mode: str, runs: int, where: str) -> dict[str, Any]:
    """``runs`` concurrent runs in this fresh process: ``plain`` asyncio, the ``agent`` on a
    journal at FULL, or the agent on a ``memory`` store (the loop alone, no journal). One run
    first, untimed, as a warm service has done (imports, first statements)."""
    journal = None
    if mode == "plain":

        async def one(i: int | str) -> str | None:
            return await workload.plain_run()

    else:
        agent = workload.conc_agent()
        if mode == "memory":
            journal = await Journal(store=MemoryStore(check=False)).open()
        else:
            journal = await Journal(os.path.join(where, "conc.db")).open()

        async def one(i: int | str) -> str | None:
            assert journal is not None
            result = await agent.run(f"r{i}", f"q{i}", journal=journal)
            return result.output if result.status is RunStatus.COMPLETED else result.status

    assert await one("warm") == "final"
    workload.Tally.executed = 0
    commits = journal.store.commits if journal else 0
    collector = GCClock()
    gc.callbacks.append(collector)
    cpu, t = time.process_time(), time.perf_counter()
    outcomes = await asyncio.gather(*(one(i) for i in range(runs)), return_exceptions=True)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    gc.callbacks.remove(collector)
    if journal is not None:
        commits = journal.store.commits - commits
        await journal.close()
    wrong = [repr(o)[:300] for o in outcomes if o != "final"]
    fired = workload.Tally.executed
    return {
        "wall": wall,
        "cpu": cpu,
        "gc": collector.seconds,
        "gc_full": collector.full,
        "wrong": wrong[:1],
        "fired": fired,
        "commits": commits,
    }


def conc_rows(sizes: Sequence[int], repeats: int, tmp: str) -> list[Row]:
    then = {1000: "0.41 s, 1.95x", 5000: "5.7x"}
    goals = {1000: 1.5, 5000: 2.0}
    rows: list[Row] = []
    for runs in sizes:
        got: dict[str, list[dict[str, Any]]] = {"plain": [], "agent": [], "memory": []}
        for _ in range(repeats):
            for mode, samples in got.items():  # interleaved: the same drift hits every mode
                with tempfile.TemporaryDirectory(dir=tmp) as where:
                    samples.append(child("conc", mode, str(runs), where))
        for mode, samples in got.items():
            for s in samples:
                assert not s["wrong"] and s["fired"] == runs, (mode, s)
        walls = {mode: [s["wall"] * 1e3 for s in samples] for mode, samples in got.items()}
        ratio = [a / p for a, p in zip(walls["agent"], walls["plain"], strict=True)]
        loop = [m / p for m, p in zip(walls["memory"], walls["plain"], strict=True)]
        costs = {mode: _costs(samples) for mode, samples in got.items()}
        commits = statistics.median(s["commits"] for s in got["agent"])
        print(
            f"conc {runs:,} runs, wall ms (CPU ms of the process, ms in the cyclic GC): plain "
            f"asyncio {span(walls['plain'])} ({costs['plain']}); the agent on the journal "
            f"{span(walls['agent'])} ({costs['agent']}), {commits:.0f} commits; the agent on a "
            f"memory store, no journal: {span(walls['memory'])} ({costs['memory']}), "
            f"x{span(loop, '{:.2f}')} of plain",
            flush=True,
        )
        goal = goals.get(runs, 2.0)
        rows.append(
            Row(
                f"{runs:,} runs at once (model 0.1 s, one SIDE_EFFECT, model 0.1 s)",
                then.get(runs, ""),
                f"{span(walls['agent'])} ms, {commits / runs:.3f} commits/run",
                f"x{span(ratio, '{:.2f}')} plain asyncio ({statistics.median(walls['plain']):,.0f}"
                " ms)",
                f"<= {goal}x",
                met(statistics.median(ratio), goal),
            )
        )
    return rows


def _costs(samples: list[dict[str, Any]]) -> str:
    """The medians of a mode's process CPU and cyclic-GC time, and its full collections."""
    cpu = statistics.median(s["cpu"] * 1e3 for s in samples)
    collected = statistics.median(s["gc"] * 1e3 for s in samples)
    full = statistics.median(s["gc_full"] for s in samples)
    return f"CPU {cpu:,.0f}, in the cyclic GC {collected:,.0f} ({full:.0f} full)"


# --- rows 2 and 3: one step in sequence -------------------------------------------------------


async def plain_steps(steps: int, safety: Safety) -> tuple[float, float]:
    """The same ScriptedModel turns and tool calls as plain awaits, no agent, no journal:
    (wall seconds, seconds inside the model)."""
    model = workload.TimedScript(workload.script(steps))
    echo = workload.ECHO[safety]
    specs = (echo.spec,)
    context = ToolContext(run_id="plain", call_id="c", tool_name="echo", safety=safety)
    messages: list[Message] = [UserMessage("go")]
    t = time.perf_counter()
    while True:
        turn = await model.complete(None, messages, specs)
        messages.append(turn)
        if not turn.tool_calls:
            break
        for call in turn.tool_calls:
            value = await echo.call(call.arguments, context)
            messages.append(ToolResultMessage(call.id, call.name, value))
    return time.perf_counter() - t, model.seconds


async def agent_steps(
    steps: int, safety: Safety, journal: Journal, run_id: str
) -> tuple[float, float, int]:
    """One run of ``steps`` steps: (wall seconds, seconds inside the model, commits)."""
    agent = workload.build(steps, safety)
    model = agent.model
    assert isinstance(model, workload.TimedScript)
    commits = journal.store.commits
    t = time.perf_counter()
    result = await agent.run(run_id, "go", journal=journal)
    wall = time.perf_counter() - t
    assert result.status is RunStatus.COMPLETED and result.output == workload.answer(steps), result
    return wall, model.seconds, journal.store.commits - commits


async def step_rows(
    steps: int, repeats: int, tmp: str, sampler: RawSampler, head: float
) -> list[Row]:
    then = {Safety.READ_ONLY: "3.44x", Safety.SIDE_EFFECT: "4.66x"}
    goals = {Safety.READ_ONLY: 1.3, Safety.SIDE_EFFECT: 2.3}
    rows: list[Row] = []
    for safety, goal in goals.items():
        await plain_steps(50, safety)  # warm the interpreter's caches, untimed
        over, loop, anchor, plain, model, commits = [], [], [], [], [], []
        for rep in range(repeats):
            async with Journal(os.path.join(tmp, f"steps-{safety.value}-{rep}.db")) as journal:
                await agent_steps(50, safety, journal, "warm")  # a migrated, warm file
                before = sampler.sample()
                p_wall, p_model = await plain_steps(steps, safety)
                a_wall, a_model, c = await agent_steps(steps, safety, journal, "timed")
                anchor.append(bracket(before, sampler.sample()).commit_1_us)
            async with Journal(store=MemoryStore(check=False)) as memory:
                m_wall, m_model, _ = await agent_steps(steps, safety, memory, "timed")
            base = p_wall - p_model
            over.append(((a_wall - a_model) - base) / steps * 1e6)
            loop.append(((m_wall - m_model) - base) / steps * 1e6)
            plain.append(base / steps * 1e6)
            model.append(a_model / steps * 1e6)
            commits.append(c / steps)
        ratio = [o / a for o, a in zip(over, anchor, strict=True)]
        alone = [o / a for o, a in zip(loop, anchor, strict=True)]
        print(
            f"step {safety.value}: +{span(over)} us/step above plain awaits (which take "
            f"{span(plain)} us/step), not counting {span(model)} us/step inside ScriptedModel "
            f"(on either side); {statistics.median(commits):.2f} commits/step; "
            f"x{span(ratio, '{:.2f}')} of the raw commit sampled around each repetition "
            f"({span(anchor)} us), x{statistics.median(over) / head:.2f} of the header's. The "
            f"agent on a memory store, no journal: +{span(loop)} us/step, "
            f"x{span(alone, '{:.2f}')} of the raw commit",
            flush=True,
        )
        rows.append(
            Row(
                f"per sequential step, {safety.name} ({steps:,} steps in one run)",
                then[safety],
                f"+{span(over)} us/step, {statistics.median(commits):.2f} commits/step",
                f"x{span(ratio, '{:.2f}')} raw commit",
                f"<= {goal}x",
                met(statistics.median(ratio), goal),
            )
        )
    return rows


# --- main --------------------------------------------------------------------------------------


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main(quick: bool, only: set[str], repeats: int | None) -> None:
    repeats = repeats or (3 if quick else 5)
    print(f"{load()} at the start", flush=True)
    anchors = measure()
    print(header(anchors), flush=True)
    if quick:
        print("(--quick: fewer repeats, steps and sizes; a smoke test, not figures)", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        sampler = RawSampler(tmp)
        if "conc" in only:
            rows += conc_rows((1000, 5000), repeats, tmp)
        if "step" in only:
            rows += await step_rows(
                300 if quick else 1000, repeats, tmp, sampler, anchors.commit_1_us
            )
        if "resume" in only:
            sizes = (10, 100, 1000) if quick else (10, 1000, 10000)
            rows += await resume.rows(sizes, repeats, tmp, sampler)
        sampler.close()
    print(f"\nissue 15's table, this run ({load()}); medians of {repeats}, min-max:\n")
    print(render(rows))
    print(
        "\nnot claimed: a scripted or sleeping model, no network, this disk and this machine; the"
        " tools do nothing, so every row is the runtime's own cost; crash safety is proven by the"
        " crash tests, not here."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, steps and sizes")
    parser.add_argument(
        "--only", default="conc,step,resume", help="comma-separated: conc,step,resume"
    )
    parser.add_argument(
        "--repeats", type=int, help="repetitions of each row (default 5, 3 with --quick)"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child and args.child[0] == "conc":
        _, mode, runs, where = args.child
        print(json.dumps(asyncio.run(conc_child(mode, int(runs), where))))
    else:
        asyncio.run(main(args.quick, set(args.only.split(",")), args.repeats))
