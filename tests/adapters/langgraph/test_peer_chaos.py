"""The peer chaos harness (``shared/peer_chaos`` beside the project) run on the LangGraph
workload with its tool node guarded by bide (``bench/peer_chaos/adapter_bide_langgraph.py``):
real forked children, real SIGKILLs, a ledger outside the journal; the charge fires at most
once in every schedule. The default suite runs a few schedules on SQLite; ``-m slow``
PostgreSQL's and the long set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.adapters.peer_chaos import TWO_ATTEMPTS, check, needs_harness, run_harness

pytestmark = needs_harness

ADAPTER = "adapter_bide_langgraph"


def test_sqlite_a_few_schedules(tmp_path: Path) -> None:
    """Named points, a crash loop and two random-point schedules on a SQLite journal."""
    check(run_harness(tmp_path, ADAPTER, family="points", seeds=2, seed_base=TWO_ATTEMPTS[0]), 2)


@pytest.mark.slow
def test_postgres_a_few_schedules(tmp_path: Path, pg_url: str) -> None:
    """Named points, a crash loop and one random-point schedule on PostgreSQL."""
    check(
        run_harness(
            tmp_path, ADAPTER, family="points", seeds=1, seed_base=TWO_ATTEMPTS[1], db=pg_url
        ),
        1,
    )


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
    report = run_harness(tmp_path, ADAPTER, family=family, seeds=seeds, db=db)
    keep = os.environ.get("BIDE_CHAOS_REPORTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        name = f"bide_langgraph-{backend_name}-{family}.json"
        (Path(keep) / name).write_text(json.dumps(report, indent=1))
    check(report, seeds)
