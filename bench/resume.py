"""Issue 15's resume rows for `bench/steps.py`: a run that died inside step N+1's tool call,
resumed in process, and the finished run resumed by `python -m runtime resume` in a fresh
process.

Each crashed run is made once per size by a child process (``python -m bench.resume PATH N
SAFETY``) that records N steps and SIGKILLs itself inside the tool call of step N+1; every
repetition resumes a fresh copy of the files it left. Nothing here counts records, commits or
model calls to assert on: how records share commits is the journal's business. What is asserted
is behaviour: the resumed run completes with the script's answer, the read-only tool re-runs at
most once, and a SIDE_EFFECT that died after its marker halts instead of running again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench import workload
from bench.anchors import RawSampler, bracket
from bench.table import Row, met, span
from bench.workload import ROOT, SAFETY_ENV, STEPS_ENV, Tally
from runtime import Journal, RunStatus, Safety

RUN = "steps"


async def crash_child(path: str, done: int, safety: Safety) -> None:
    """Record ``done`` steps, then die inside the tool call of step ``done + 1``."""
    Tally.crash_at = done
    agent = workload.build(done + 1, safety)
    async with Journal(path) as journal:
        await agent.run(RUN, "go", journal=journal, spec=workload.SPEC)
    raise SystemExit("the run finished: the crash never fired")


def agent_env(steps: int, safety: Safety) -> dict[str, str]:
    """What ``bench.workload:make_agent`` reads to rebuild the run's agent in a child."""
    return workload.child_env(**{STEPS_ENV: str(steps), SAFETY_ENV: safety.value})


def crash(path: str, done: int, safety: Safety) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.resume", path, str(done), safety.value],
        cwd=ROOT,
        env=agent_env(done + 1, safety),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if out.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the crashing child exited {out.returncode}:\n{out.stderr[-3000:]}")


def copy(src: str, dst: str) -> None:
    """The files a killed process leaves (the -shm is rebuilt from the WAL on open)."""
    for suffix in ("", "-wal"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


async def resume_once(path: str, done: int, safety: Safety) -> dict[str, Any]:
    """Open a fresh Journal on the crashed run (not timed), then time ``agent.resume``."""
    agent = workload.build(done + 1, safety)
    model = agent.model
    assert isinstance(model, workload.TimedScript)
    Tally.executed = 0
    t0 = time.perf_counter()
    journal = await Journal(path).open()
    t1 = time.perf_counter()
    commits = journal.store.commits
    result = await agent.resume(RUN, journal=journal)
    t2 = time.perf_counter()
    commits = journal.store.commits - commits
    await journal.close()
    if safety is Safety.READ_ONLY:
        assert result.status is RunStatus.COMPLETED, result
        assert result.output == workload.answer(done + 1), result
        assert Tally.executed <= 1, f"the read-only tool ran {Tally.executed} times on resume"
    else:
        assert result.status is RunStatus.HALTED, result
        assert Tally.executed == 0, "a side effect that died after its marker ran again"
    return {
        "open_ms": (t1 - t0) * 1e3,
        "ms": (t2 - t1 - model.seconds) * 1e3,
        "model_ms": model.seconds * 1e3,
        "model_calls": model.calls,
        "reruns": Tally.executed,
        "commits": commits,
    }


async def resumed(
    master: str, done: int, safety: Safety, repeats: int, tmp: str, sampler: RawSampler
) -> tuple[list[dict[str, Any]], str]:
    """``repeats`` in-process resumes of copies of ``master``, each between two raw samples;
    and the path of the last copy (a finished run when the resume completed it)."""
    samples, work = [], ""
    for rep in range(repeats):
        if work:
            _remove(work)
        work = os.path.join(tmp, f"resumed-{safety.value}-{done}-{rep}.db")
        copy(master, work)
        before = sampler.sample()
        sample = await resume_once(work, done, safety)
        sample["anchor_us"] = bracket(before, sampler.sample()).commit_1_us
        samples.append(sample)
    return samples, work


async def replay_finished(path: str, done: int) -> float:
    """In process, what the CLI does once Python and bide are imported: open the journal,
    resume the finished run (its recorded result: no model, no tool), close. Milliseconds."""
    agent = workload.build(done + 1, Safety.READ_ONLY)
    model = agent.model
    assert isinstance(model, workload.TimedScript)
    Tally.executed = 0
    t = time.perf_counter()
    async with Journal(path) as journal:
        result = await agent.resume(RUN, journal=journal)
    ms = (time.perf_counter() - t) * 1e3
    assert result.status is RunStatus.COMPLETED and result.output == workload.answer(done + 1)
    assert model.calls == 0 and Tally.executed == 0, "a finished run called its model or tool"
    return ms


def process_ms(args: Sequence[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall milliseconds of ``python *args`` from spawn to exit, and its last line of stdout."""
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    ms = (time.perf_counter() - t) * 1e3
    if out.returncode != 0:
        raise RuntimeError(f"{args} exited {out.returncode}:\n{out.stderr[-3000:]}")
    return ms, (out.stdout.strip().splitlines() or [""])[-1]


def cli_ms(path: str, done: int) -> float:
    """`python -m runtime --db PATH resume RUN` of the finished run, the agent rebuilt from the
    journaled spec (``bench.workload:make_agent``)."""
    env = agent_env(done + 1, Safety.READ_ONLY)
    ms, last = process_ms(["-m", "runtime", "--db", path, "resume", RUN], env)
    assert last == workload.answer(done + 1), last
    return ms


def bare_ms() -> float:
    return process_ms(["-c", "import sqlite3"], workload.child_env())[0]


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


async def rows(sizes: Sequence[int], repeats: int, tmp: str, sampler: RawSampler) -> list[Row]:
    out: list[Row] = []
    finished: dict[int, str] = {}
    medians: dict[int, float] = {}
    for done in sizes:
        master = os.path.join(tmp, f"crashed-{done}.db")
        crash(master, done, Safety.READ_ONLY)
        samples, finished[done] = await resumed(
            master, done, Safety.READ_ONLY, repeats, tmp, sampler
        )
        ms = [s["ms"] for s in samples]
        ratio = [s["ms"] * 1e3 / s["anchor_us"] for s in samples]
        # The history's messages are made as the model reads them, so the model's time holds
        # that too: the figure with it is printed beside the one without.
        whole = [s["ms"] + s["model_ms"] for s in samples]
        medians[done] = statistics.median(ms)
        commits = statistics.median(s["commits"] for s in samples)
        print(
            f"resume in process after {done:,} steps: {span(ms, '{:.2f}')} ms in agent.resume, "
            f"not counting {span([s['model_ms'] for s in samples], '{:.2f}')} ms inside "
            f"ScriptedModel (model calls: {samples[0]['model_calls']}) nor the journal's open "
            f"({span([s['open_ms'] for s in samples], '{:.1f}')} ms); {commits:.0f} commits, "
            f"read-only re-runs {[s['reruns'] for s in samples]}; x{span(ratio, '{:.1f}')} of "
            f"the raw commit around it ({span([s['anchor_us'] for s in samples])} us)",
            flush=True,
        )
        out.append(
            Row(
                f"resume after {done:,} recorded steps, in process (died in step {done + 1:,}'s"
                " tool)",
                "20 ms" if done == 1000 else "",
                f"{span(ms, '{:.2f}')} ms ({span(whole, '{:.2f}')} with the model's time),"
                f" {commits:.0f} commits",
                f"x{span(ratio, '{:.1f}')} raw commit",
                "<= 2 ms",
                met(medians[done], 2.0),
            )
        )
    low, high = min(sizes), max(sizes)
    growth = medians[high] / medians[low]
    slope = (medians[high] - medians[low]) * 1e3 / (high - low)
    out.append(
        Row(
            f"resume in process, {high:,} steps against {low:,}",
            "",
            f"{slope:+.2f} us per recorded step",
            f"x{growth:.2f} of the {low:,}-step resume",
            "flat (<= 1.25x)",
            met(growth, 1.25),
        )
    )
    await side_effect_halts(sizes[len(sizes) // 2], repeats, tmp, sampler)
    for done in sizes:
        bare, cli, replay = [], [], []
        for _ in range(repeats):  # interleaved: the CLI between its two baselines
            bare.append(bare_ms())
            cli.append(cli_ms(finished[done], done))
            replay.append(await replay_finished(finished[done], done))
        ratio = [c / (b + r) for c, b, r in zip(cli, bare, replay, strict=True)]
        print(
            f"resume in a fresh process, finished run of {done:,} steps: `python -m runtime "
            f"resume` {span(cli)} ms spawn to exit; bare `python -c 'import sqlite3'` "
            f"{span(bare)} ms; the same resume in process (open, resume, close) "
            f"{span(replay, '{:.1f}')} ms; x{span(ratio, '{:.2f}')} of the two",
            flush=True,
        )
        out.append(
            Row(
                f"resume in a fresh process (`python -m runtime resume` of a finished run of "
                f"{done:,} steps)",
                "340 ms" if done == 1000 else "",
                f"{span(cli)} ms",
                f"x{span(ratio, '{:.2f}')} of bare python ({statistics.median(bare):.0f} ms)"
                f" + that replay ({statistics.median(replay):.1f} ms)",
                "<= 2.5x",
                met(statistics.median(ratio), 2.5),
            )
        )
    return out


async def side_effect_halts(done: int, repeats: int, tmp: str, sampler: RawSampler) -> None:
    """Not a row of the table: the same crash with a SIDE_EFFECT tool must halt on resume."""
    master = os.path.join(tmp, f"crashed-side-effect-{done}.db")
    crash(master, done, Safety.SIDE_EFFECT)
    samples, _ = await resumed(master, done, Safety.SIDE_EFFECT, repeats, tmp, sampler)
    ms = [s["ms"] for s in samples]
    print(
        f"resume in process after {done:,} SIDE_EFFECT steps, died inside step {done + 1:,}'s "
        f"call: halted every time, the call not run again; {span(ms, '{:.2f}')} ms to the halt, "
        f"x{span([s['ms'] * 1e3 / s['anchor_us'] for s in samples], '{:.1f}')} raw commit",
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(crash_child(sys.argv[1], int(sys.argv[2]), Safety(sys.argv[3])))
