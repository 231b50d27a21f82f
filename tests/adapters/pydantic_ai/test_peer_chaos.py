"""The peer chaos harness (``shared/peer_chaos`` beside the project) run on the Pydantic AI
workload through bide (``bench/peer_chaos/adapter_bide_pydantic_ai.py``): real forked children,
real SIGKILLs at named points and at seeded instants, a ledger outside the journal. The charge
fires at most once in every schedule, and every halt is settled by the ledger reconciler.

The default suite runs a few schedules on each backend; ``-m slow`` runs the long set.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env

HARNESS = ROOT.parent / "shared" / "peer_chaos"
ADAPTER = ROOT / "bench" / "peer_chaos" / "adapter_bide_pydantic_ai.py"

pytestmark = pytest.mark.skipif(
    not (HARNESS / "harness.py").exists(), reason=f"the peer chaos harness is not at {HARNESS}"
)


def run_harness(
    where: Path, *, family: str, seeds: int, db: str | None = None, seed_base: int = 0
) -> dict[str, Any]:
    """Run the harness from a copy of its folder (it writes beside itself) and return its
    report."""
    copy = where / "peer_chaos"
    shutil.copytree(HARNESS, copy)
    for path in [copy, *copy.iterdir()]:
        path.chmod(path.stat().st_mode | 0o200)
    shutil.copy(ADAPTER, copy / ADAPTER.name)
    out = where / "report.json"
    env = child_env()
    env.pop("BIDE_CHAOS_DB", None)
    if db is not None:
        env["BIDE_CHAOS_DB"] = db
    argv = [sys.executable, "harness.py", ADAPTER.stem, "--family", family]
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


def test_the_two_attempt_seeds_are_what_they_say() -> None:
    """The seeds above do plan a kill before the charge, then one after it (the harness's
    own draw), so the default schedules settle a halt on a second attempt."""
    sys.path.insert(0, str(HARNESS))
    try:
        import workload
    finally:
        sys.path.remove(str(HARNESS))
    for seed in TWO_ATTEMPTS:
        rng = random.Random(1_000_003 * (seed + 1))
        plan = [rng.choice(workload.POINTS) if rng.random() < 0.75 else None for _ in range(2)]
        assert plan == ["before_charge", "after_charge_fsync"], (seed, plan)


# Seeds of the points family whose first attempt dies after the charge's marker and before the
# charge, and whose second (after "not executed") dies after the charge: the reconciler must
# judge attempt 2, and the charge still fires once.
TWO_ATTEMPTS = (4, 76)


def test_sqlite_a_few_schedules(tmp_path: Path) -> None:
    """Named points, a crash loop and two random-point schedules on a SQLite journal."""
    check(run_harness(tmp_path, family="points", seeds=2, seed_base=TWO_ATTEMPTS[0]), 2)


def test_postgres_a_few_schedules(tmp_path: Path, pg_url: str) -> None:
    """Named points, a crash loop and one random-point schedule on PostgreSQL."""
    check(run_harness(tmp_path, family="points", seeds=1, seed_base=TWO_ATTEMPTS[1], db=pg_url), 1)


LONG = [
    pytest.param("sqlite", "time", 200, id="sqlite-time-200"),
    pytest.param("sqlite", "points", 100, id="sqlite-points-100"),
    pytest.param("postgres", "time", 100, id="postgres-time-100"),
    pytest.param("postgres", "points", 100, id="postgres-points-100"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("backend_name", "family", "seeds"), LONG)
def test_long_set(
    tmp_path: Path, request: pytest.FixtureRequest, backend_name: str, family: str, seeds: int
) -> None:
    """The long set: maxFired 1 over every schedule of each family on each backend. The report
    is kept when ``$BIDE_CHAOS_REPORTS`` names a folder."""
    db = request.getfixturevalue("pg_url") if backend_name == "postgres" else None
    report = run_harness(tmp_path, family=family, seeds=seeds, db=db)
    keep = os.environ.get("BIDE_CHAOS_REPORTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        name = f"bide_pydantic_ai-{backend_name}-{family}.json"
        (Path(keep) / name).write_text(json.dumps(report, indent=1))
    check(report, seeds)
