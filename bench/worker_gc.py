"""The ``worker`` command with many runs in flight: what tuning its collector buys and costs.

Run: python bench/worker_gc.py [--runs N] [--rounds R] [--other PYTHON]. Each sample submits N
runs of ``bench.worker_gc_agent`` to a fresh SQLite journal, then times ``python -m runtime
worker --concurrency N --exit-when-idle 0.5`` from spawn to exit, with the worker's peak RSS and
CPU (its own ``wait4`` usage). With ``--other``, a second interpreter (another checkout's venv)
runs the same samples, interleaved round by round: the "old" column. The idle wait is in both.
"""

from __future__ import annotations

import argparse
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


def sample(python: str, runs: int, tmp: str) -> tuple[float, float, float]:
    """Wall seconds, peak RSS in MB and CPU seconds of one worker draining ``runs`` runs."""
    db = os.path.join(tmp, "w.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    env = dict(os.environ, PYTHONPATH=tmp)  # the agent's module alone: each side its own bide
    subprocess.run([python, "-c", SUBMIT, db, str(runs)], env=env, check=True, cwd=tmp)
    argv = [python, "-m", "runtime", "--db", db, "worker", "--agent", f"{AGENT}:make_agent"]
    argv += ["--concurrency", str(runs), "--poll", "0.05", "--exit-when-idle", "0.5"]
    t = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=tmp, stderr=subprocess.DEVNULL)
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
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--other", help="another checkout's python: the old column")
    args = parser.parse_args()
    sides = [("old", args.other)] if args.other else []
    sides.append(("new", sys.executable))
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(HERE, f"{AGENT}.py"), tmp)
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in sides}
    try:
        for r in range(args.rounds):
            for name, python in sides:
                load = os.getloadavg()
                s = sample(python, args.runs, tmp)
                got[name].append(s)
                loads = " ".join(f"{x:.2f}" for x in load)
                print(
                    f"round {r + 1} {name}: {s[0]:.2f} s, peak RSS {s[1]:.0f} MB, "
                    f"CPU {s[2]:.2f} s (load {loads})",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp)
    for name, samples in got.items():
        wall, rss, cpu = (statistics.median(x) for x in zip(*samples, strict=True))
        print(f"{name}: {args.runs} runs, median wall {wall:.2f} s, peak RSS {rss:.0f} MB, "
              f"CPU {cpu:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
