"""Startup: what a fresh ``python -m runtime resume`` (and ``show``) of a finished run costs.

Run: python bench/startup.py [--repeats N] [--calls 50,500]. For each size it builds a finished
run (READ_ONLY calls through the agent named ``bench.startup_agent:make_agent``),
then, interleaved and repeated, times whole processes from spawn to exit: a bare
``python -c "import sqlite3"`` (the anchor), ``python -c "import runtime"``, ``python -m runtime
resume RUN`` and ``python -m runtime show RUN``. The in-process cost of the same resume (open the
journal, ``agent.resume``, close, with every import already done) is measured beside them, and
the resume process is stated against the anchor plus it (the aim: x2.5 at most). Then
``-X importtime`` of ``import runtime`` and of the resume process, by top-level package, and
which of the heavy optional packages the resume and show processes imported at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import structlog

from bench.startup_agent import CALLS_VARIABLE, make_agent
from runtime import Journal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = "bench.startup_agent:make_agent"
HEAVY = (
    "sqlalchemy",
    "alembic",
    "jsonschema",
    "pydantic",
    "cryptography",
    "mcp",
    "opentelemetry",
    "asyncpg",
    "structlog",
)
"""Packages bide needs only for some commands (structlog: the CLI logs through it)."""

structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    cache_logger_on_first_use=True,
)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float]) -> str:
    return f"{median(xs):.0f} ms ({min(xs):.0f}-{max(xs):.0f})"


def child_env(calls: int) -> dict[str, str]:
    env = dict(os.environ)
    # Children write and reuse bytecode caches, as an installed bide has them: without, every
    # process would compile bide's sources and the figures would be the compiler's.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env[CALLS_VARIABLE] = str(calls)
    env.pop("BIDE_DB", None)
    return env


def process_ms(args: Sequence[str], env: dict[str, str]) -> float:
    """Wall milliseconds of ``python *args`` from spawn to exit (it must exit 0)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, env=env, capture_output=True, cwd=ROOT)
    return (time.perf_counter() - t) * 1e3


async def build(path: str, calls: int) -> tuple[str, int]:
    """A finished run of ``calls`` READ_ONLY calls; its id and record count."""
    os.environ[CALLS_VARIABLE] = str(calls)
    run_id = f"startup-{calls}"
    async with Journal(path) as journal:
        result = await make_agent().run(run_id, "go", journal=journal, spec=SPEC)
        assert result.status.value == "completed", result
        state = await journal.state(run_id)
    assert state is not None
    return run_id, len(state.records)


async def in_process_ms(path: str, run_id: str) -> float:
    """Open the journal, resume the finished run, close it: the CLI's work without its process."""
    agent = make_agent()
    t = time.perf_counter()
    async with Journal(path) as journal:
        result = await agent.resume(run_id, journal=journal)
    elapsed = (time.perf_counter() - t) * 1e3
    assert result.status.value == "completed", result
    return elapsed


def import_time(args: Sequence[str], env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """``python -X importtime *args``: the total and the self time by top-level package (ms)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    ).stderr
    by_package: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            package = m.group(2).split(".")[0]
            by_package[package] = by_package.get(package, 0) + int(m.group(1))
    heavy = sorted(by_package.items(), key=lambda kv: -kv[1])[:10]
    return sum(by_package.values()) / 1e3, [(n, us / 1e3) for n, us in heavy]


IMPORTED = """
import runpy, sys, json, atexit
heavy = sys.argv.pop(1).split(",")
atexit.register(lambda: print(json.dumps(sorted(h for h in heavy if h in sys.modules)),
                              file=sys.stderr))
sys.argv = ["runtime", *sys.argv[1:]]
runpy.run_module("runtime", run_name="__main__", alter_sys=True)
"""


def imported(words: Sequence[str], env: dict[str, str]) -> list[str]:
    """Which of ``HEAVY`` a ``python -m runtime WORDS`` process had imported when it exited."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORTED, ",".join(HEAVY), *words],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    last = out.stderr.strip().splitlines()[-1]
    found: list[str] = json.loads(last)
    return found


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


async def main(repeats: int, sizes: Sequence[int]) -> None:
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; {load()} at the start")
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for calls in sizes:
            path = os.path.join(tmp, f"startup-{calls}.db")
            run_id, records = await build(path, calls)
            env = child_env(calls)
            db = ["--db", path]
            commands = {
                "bare": ["-c", "import sqlite3"],
                "import": ["-c", "import runtime"],
                "resume": ["-m", "runtime", *db, "-q", "resume", run_id],
                "show": ["-m", "runtime", *db, "show", run_id],
            }
            samples: dict[str, list[float]] = {name: [] for name in [*commands, "in_process"]}
            for args in commands.values():  # one unmeasured round warms the caches
                process_ms(args, env)
            await in_process_ms(path, run_id)
            for _ in range(repeats):
                for name, args in commands.items():
                    samples[name].append(process_ms(args, env))
                samples["in_process"].append(await in_process_ms(path, run_id))
            bare, inner = median(samples["bare"]), median(samples["in_process"])
            lines = [
                f"{records} records ({calls} calls), medians of {repeats}, {load()} at the end:",
                f"  python -c 'import sqlite3'   {spread(samples['bare'])}",
                f"  python -c 'import runtime'   {spread(samples['import'])}",
                f"  in-process resume            {spread(samples['in_process'])}",
                f"  python -m runtime resume     {spread(samples['resume'])}: "
                f"x{median(samples['resume']) / (bare + inner):.2f} of bare + in-process "
                "(aim <= 2.5)",
                f"  python -m runtime show       {spread(samples['show'])}: "
                f"x{median(samples['show']) / (bare + inner):.2f} of bare + in-process",
            ]
            for line in lines:
                print(line, flush=True)
            summary += lines
        words = ["--db", path, "-q", "resume", run_id]
        for what, args in (
            ("import runtime", ["-c", "import runtime"]),
            ("python -m runtime resume", ["-m", "runtime", *words]),
        ):
            total, heavy = import_time(args, env)
            line = f"-X importtime {what}: {total:.0f} ms; heaviest (self, by package): " + (
                ", ".join(f"{n} {ms:.0f}" for n, ms in heavy)
            )
            print(line, flush=True)
            summary.append(line)
        for verb in ("resume", "show"):
            found = imported(["--db", path, "-q", verb, run_id], env)
            line = f"{verb} imported, of {', '.join(HEAVY)}: {', '.join(found) or 'none'}"
            print(line, flush=True)
            summary.append(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15, help="samples of each process")
    parser.add_argument(
        "--calls", default="50,500", help="comma-separated sizes of the finished run, in calls"
    )
    args = parser.parse_args()
    asyncio.run(main(args.repeats, [int(c) for c in args.calls.split(",")]))
