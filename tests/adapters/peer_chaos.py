"""Running the peer chaos harness (``shared/peer_chaos`` beside the project) on a framework's
workload through bide (an adapter of ``bench/peer_chaos/``), and what every report must show."""

from __future__ import annotations

import json
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
    env = child_env()
    env.pop("BIDE_CHAOS_DB", None)
    if db is not None:
        env["BIDE_CHAOS_DB"] = db
    argv = [sys.executable, "harness.py", adapter, "--family", family]
    argv += ["--seeds", str(seeds), "--seed-base", str(seed_base), "--out", str(out)]
    argv += ["--clean-samples", "1" if seeds < 25 else "5"]
    done = subprocess.run(
        argv, cwd=copy, env=env, capture_output=True, text=True, timeout=60 + 30 * seeds
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


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
