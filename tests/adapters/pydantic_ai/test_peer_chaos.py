"""The peer chaos harness (``shared/peer_chaos`` beside the project) run on the Pydantic AI
workload through bide (``bench/peer_chaos/adapter_bide_pydantic_ai.py``): real forked children,
real SIGKILLs at named points and at seeded instants, a ledger outside the journal. The charge
fires at most once in every schedule, and every halt is settled by the ledger reconciler.

The default suite runs a few schedules on each backend; ``-m slow`` runs the long set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.peer_chaos import LONG, a_few, long_set, needs_harness

pytestmark = needs_harness

ADAPTER = "adapter_bide_pydantic_ai"


def test_sqlite_a_few_schedules(tmp_path: Path) -> None:
    a_few(tmp_path, ADAPTER)


@pytest.mark.slow  # the default suite's budget: PostgreSQL's few run with the long set
def test_postgres_a_few_schedules(tmp_path: Path, pg_url: str) -> None:
    a_few(tmp_path, ADAPTER, db=pg_url)


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "family", "seeds"), LONG)
def test_long_set(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, family: str, seeds: int
) -> None:
    long_set(tmp_path, request, ADAPTER, backend, family, seeds)
