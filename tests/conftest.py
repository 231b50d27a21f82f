"""Fixtures shared by the whole suite: a fresh journal per test (a SQLite file, or a PostgreSQL
database), and child processes.

The ``journal`` fixture runs on SQLite unless ``BIDE_TEST_BACKEND=postgres`` (then every test that
uses it runs on PostgreSQL); the modules in ``BOTH_BACKENDS`` run their ``journal`` tests on both,
in the default suite. ``pg_url`` is a fresh PostgreSQL database at head for one test.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import structlog

from runtime.journal import Journal, SQLiteStore
from tests.postgres import server

ROOT = Path(__file__).resolve().parents[1]

# The library never configures structlog; the suite keeps its output to info and above.
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (long sets, each behaviour of which a faster test in the default
    run also shows) run only when asked for: ``-m slow``."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    for item in items:
        if "slow" in item.keywords:
            where = os.path.dirname(os.path.relpath(item.path, ROOT))
            reason = f"a long run: run it with `-m slow {where}`"
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "bide.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SQLiteStore]:
    s = await SQLiteStore.open(db_path)
    try:
        yield s
    finally:
        await s.close()


BACKEND = os.environ.get("BIDE_TEST_BACKEND", "sqlite")
"""Where the ``journal`` fixture lives: ``sqlite`` (the default) or ``postgres``."""

BOTH_BACKENDS = frozenset(
    {
        "tests/runtime/test_ahead.py",
        "tests/runtime/test_resume_matrix.py",
        "tests/runtime/test_hitl.py",
        "tests/runtime/test_history.py",
        "tests/runtime/test_runs.py",
        "tests/runtime/test_output.py",
        "tests/runtime/test_limits.py",
        "tests/runtime/test_sessions.py",
        "tests/runtime/test_events.py",
        "tests/runtime/test_children.py",
        "tests/runtime/test_children_limits.py",
        "tests/runtime/test_waits.py",
        "tests/journal/test_fuzz.py",
    }
)
"""Modules whose tests that take ``journal`` (and not ``db_path``, which names a SQLite file)
run on both backends in the default suite."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "journal" not in metafunc.fixturenames or "db_path" in metafunc.fixturenames:
        return
    module = os.path.relpath(metafunc.definition.path, ROOT)
    if module in BOTH_BACKENDS and BACKEND == "sqlite":
        metafunc.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The ``journal`` fixture's database. A test that also takes ``db_path`` reopens the
    journal by that file name, so its journal stays that SQLite file."""
    if "db_path" in request.fixturenames:
        return "sqlite"
    return str(getattr(request, "param", BACKEND))


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A database bide migrated to head, once per session: each test's database is a copy."""
    why = server.reachable()
    if why is not None:
        if os.environ.get("BIDE_TEST_REQUIRE_POSTGRES"):
            pytest.fail(why)
        pytest.skip(why)
    with server.database() as url:

        async def migrate() -> None:
            from runtime.store.postgres import PostgresStore

            await (await PostgresStore.open(url)).close()

        server.run(migrate())
        yield url.rpartition("/")[2]


@pytest.fixture
def pg_empty(pg_template: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (no bide schema) for this test, dropped afterwards."""
    with server.database() as url:
        yield url


@pytest.fixture(scope="session")
def pg_copies(pg_template: str) -> Iterator[server.Copies]:
    """Copies of the template, made ahead of the tests that take them (see ``server.Copies``)."""
    copies = server.Copies(pg_template)
    try:
        yield copies
    finally:
        copies.close()


@pytest.fixture
def pg_url(pg_copies: server.Copies) -> Iterator[str]:
    """A fresh PostgreSQL database at head for this test, dropped afterwards."""
    with pg_copies.database() as url:
        yield url


@pytest.fixture
async def journal(request: pytest.FixtureRequest, backend: str) -> AsyncIterator[Journal]:
    url: str | Path = (
        request.getfixturevalue("pg_url")
        if backend == "postgres"
        else request.getfixturevalue("db_path")
    )
    async with Journal(url) as j:
        yield j


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python process that imports this checkout's bide."""
    env = dict(os.environ)
    env.pop("BIDE_CRASH", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def run_child(code: str, *, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh Python process; return it finished (killed or not)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
