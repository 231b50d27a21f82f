"""Running the peer chaos harness (``shared/peer_chaos`` beside the project) on a framework's
workload through bide (an adapter of ``bench/peer_chaos/``), and what every report must show."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env

HARNESS = ROOT.parent / "shared" / "peer_chaos"
ADAPTERS = ROOT / "bench" / "peer_chaos"

needs_harness = pytest.mark.skipif(
    not (HARNESS / "harness.py").exists(), reason=f"the peer chaos harness is not at {HARNESS}"
)


def run_harness(
    where: Path,
    adapter: str,
    *,
    family: str,
    seeds: int,
    db: str | None = None,
    seed_base: int = 0,
) -> dict[str, Any]:
    """Run the harness from a copy of its folder (it writes beside itself) and return its
    report."""
    copy = where / "peer_chaos"
    shutil.copytree(HARNESS, copy)
    for path in [copy, *copy.iterdir()]:
        path.chmod(path.stat().st_mode | 0o200)
    for module in ADAPTERS.glob("*.py"):
        shutil.copy(module, copy / module.name)
    out = where / "report.json"
    env = child_env(BIDE_CHAOS_STACKS=str(STALL_S))
    env.pop("BIDE_CHAOS_DB", None)
    if db is not None:
        env["BIDE_CHAOS_DB"] = db
    argv = [sys.executable, "harness.py", adapter, "--family", family, "--keep"]
    argv += ["--seeds", str(seeds), "--seed-base", str(seed_base), "--out", str(out)]
    argv += ["--clean-samples", "1" if seeds < 25 else "5"]
    done = subprocess.run(
        argv, cwd=copy, env=env, capture_output=True, text=True, timeout=60 + 30 * seeds
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    stalled = stalls(copy / "work")
    assert not stalled, f"attempts ran past {STALL_S} s:\n" + "\n".join(stalled)[-8000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


STALL_S = 20
"""Seconds past which an attempt has stalled (a clean one takes about a second): it writes every
thread's stack to its log (``$BIDE_CHAOS_STACKS``), and the run fails showing them, even where
the harness let it pass (an attempt its 60 s limit killed that the next attempt made good)."""


_DUMP = re.compile(r"^Timeout \(\d+:\d\d:\d\d(\.\d+)?\)!$", re.MULTILINE)
"""The line ``faulthandler`` writes before a stack dump it was asked for after a time."""


def stalls(work: Path) -> list[str]:
    """Every attempt log under ``work`` that holds a stack dump: its path, then the dump."""
    found = []
    for log in sorted(work.glob("*/*/attempt*.log")):
        text = log.read_text(errors="replace")
        dump = _DUMP.search(text)
        if dump is not None:
            found.append(f"{log.relative_to(work)}:\n{text[dump.start() :]}")
    return found


def check(report: dict[str, Any], seeds: int) -> None:
    """At most once in every schedule, every run finished, every fairness check passed."""
    fair = report["fairness"]
    failed = {name: v for name, v in fair.items() if "ok" in v and not v["ok"]}
    assert not failed, failed
    assert fair["kill_after_fsync_then_resume"]["fired"] == 1, fair
    assert fair["kill_before_charge_then_resume_fires_once"]["lookup_reexecuted_on_resume"] is False
    summary = report["summary"]["all"]
    assert summary["schedules"] == seeds + len(report["deterministic"]), summary
    assert summary["maxFired"] == 1, summary
    assert summary["violations"] == 0, summary
    assert summary["misses"] == 0, summary
    assert summary["not_completed"] == 0, summary
    assert summary["errors"] == 0, summary
    # A kill right after the charge's fsync always ends in a halt the reconciler settles.
    after_fsync = next(
        s for s in report["deterministic"] if s["schedule"] == "kill@after_charge_fsync x1"
    )
    assert after_fsync["fired"] == 1 and after_fsync["completed"], after_fsync


# Seeds of the points family whose first attempt dies after the charge's marker and before the
# charge, and whose second (after "not executed") dies after the charge: the reconciler must
# judge attempt 2, and the charge still fires once.
TWO_ATTEMPTS = (4, 76)


def a_few(where: Path, adapter: str, *, db: str | None = None) -> None:
    """The default suite's schedules: named points, a crash loop and two random-point
    schedules on SQLite (one on PostgreSQL, ``db``), seeded to judge a second attempt."""
    seeds = 2 if db is None else 1
    base = TWO_ATTEMPTS[0] if db is None else TWO_ATTEMPTS[1]
    check(run_harness(where, adapter, family="points", seeds=seeds, seed_base=base, db=db), seeds)


LONG = [
    pytest.param("sqlite", "time", 200, id="sqlite-time-200"),
    pytest.param("sqlite", "points", 100, id="sqlite-points-100"),
    pytest.param("postgres", "time", 100, id="postgres-time-100"),
    pytest.param("postgres", "points", 100, id="postgres-points-100"),
]
"""The long set (``-m slow``): (backend, family, seeds)."""


def long_set(
    where: Path, request: pytest.FixtureRequest, adapter: str, backend: str, family: str, seeds: int
) -> None:
    """maxFired 1 over every schedule of one family on one backend. The report is kept when
    ``$BIDE_CHAOS_REPORTS`` names a folder (``<adapter>-<backend>-<family>.json``)."""
    db = request.getfixturevalue("pg_url") if backend == "postgres" else None
    report = run_harness(where, adapter, family=family, seeds=seeds, db=db)
    keep = os.environ.get("BIDE_CHAOS_REPORTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        name = f"{adapter.removeprefix('adapter_')}-{backend}-{family}.json"
        (Path(keep) / name).write_text(json.dumps(report, indent=1))
    check(report, seeds)
