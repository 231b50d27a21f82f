"""The ``worker`` command with many runs in flight: what tuning its collector buys and costs.

Run: python bench/worker_gc.py [--runs N] [--rounds R] [--model-seconds S] [--other PYTHON].
Each sample submits N runs of ``bench.worker_gc_agent`` to a fresh SQLite journal, then times
``python -m runtime worker --concurrency N --exit-when-idle 0.5`` from spawn to exit, with the
worker's peak RSS and CPU (its own ``wait4`` usage) and its time in the cyclic collector (a
``sitecustomize`` beside the agent's module times every collection through ``gc.callbacks``).
With ``--other``, a second interpreter (another checkout's venv) runs the same samples,
interleaved round by round: the "old" column. The idle wait is in both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = "worker_gc_agent"

SUBMIT = """
import asyncio, sys
from runtime import Journal
from worker_gc_agent import make_agent
async def main(db, n):
    agent = make_agent()
    async with Journal(db) as journal:
        for i in range(n):
            await agent.submit(f"r{i}", "go", journal=journal, spec="worker_gc_agent:make_agent")
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


GC_PROBE = """
import atexit, gc, json, os, time
_t = [0.0, 0.0, 0, 0]
def _probe(phase, info):
    if phase == "start":
        _t[1] = time.perf_counter()
    else:
        _t[0] += time.perf_counter() - _t[1]
        _t[2] += 1
        _t[3] += info["generation"] == 2
gc.callbacks.append(_probe)
def _report():
    path = os.environ.get("BIDE_BENCH_GC_OUT")
    if path:
        with open(path, "w") as f:
            json.dump({"gc_s": _t[0], "collections": _t[2], "full": _t[3]}, f)
atexit.register(_report)
"""


def sample(python: str, runs: int, tmp: str, seconds: float) -> tuple[float, ...]:
    """Wall seconds, peak RSS in MB, CPU seconds, seconds in the collector and its full
    collections, of one worker draining ``runs`` runs."""
    db = os.path.join(tmp, "w.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    out = os.path.join(tmp, "gc.json")
    env = dict(os.environ, PYTHONPATH=tmp)  # the agent's module alone: each side its own bide
    env["BIDE_BENCH_MODEL_SECONDS"] = str(seconds)
    subprocess.run([python, "-c", SUBMIT, db, str(runs)], env=env, check=True, cwd=tmp)
    argv = [python, "-m", "runtime", "--db", db, "worker", "--agent", f"{AGENT}:make_agent"]
    argv += ["--concurrency", str(runs), "--poll", "0.05", "--exit-when-idle", "0.5"]
    t = time.perf_counter()
    child = subprocess.Popen(
        argv, env=dict(env, BIDE_BENCH_GC_OUT=out), cwd=tmp, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"the worker exited with status {status}")
    done = subprocess.run(
        [python, "-c", f"import sqlite3; print(sqlite3.connect({db!r}).execute("
         "\"SELECT count(*) FROM bide_runs WHERE status = 'completed'\").fetchone()[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    if int(done.stdout) != runs:
        raise RuntimeError(f"{done.stdout.strip()} of {runs} runs completed")
    with open(out) as f:
        gc_ = json.load(f)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024, cpu, gc_["gc_s"], gc_["full"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model-seconds", type=float, default=0.1, help="each model turn's sleep")
    parser.add_argument("--other", help="another checkout's python: the old column")
    args = parser.parse_args()
    sides = [("old", args.other)] if args.other else []
    sides.append(("new", sys.executable))
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(HERE, f"{AGENT}.py"), tmp)
    with open(os.path.join(tmp, "sitecustomize.py"), "w") as f:
        f.write(GC_PROBE)
    got: dict[str, list[tuple[float, ...]]] = {name: [] for name, _ in sides}
    try:
        for r in range(args.rounds):
            for name, python in sides:
                load = os.getloadavg()
                s = sample(python, args.runs, tmp, args.model_seconds)
                got[name].append(s)
                loads = " ".join(f"{x:.2f}" for x in load)
                print(
                    f"round {r + 1} {name}: {s[0]:.2f} s, peak RSS {s[1]:.0f} MB, "
                    f"CPU {s[2]:.2f} s, collector {s[3]:.2f} s ({s[4]} full) (load {loads})",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp)
    for name, samples in got.items():
        wall, rss, cpu, gc_s, _ = (statistics.median(x) for x in zip(*samples, strict=True))
        print(
            f"{name}: {args.runs} runs, medians: wall {wall:.2f} s, peak RSS {rss:.0f} MB, "
            f"CPU {cpu:.2f} s, collector {gc_s:.2f} s"
        )


if __name__ == "__main__":
    main()
