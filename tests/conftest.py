"""Fixtures shared by the whole suite: a fresh journal file per test, and child processes."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from runtime.journal import Journal, SQLiteStore

ROOT = Path(__file__).resolve().parents[1]

# The library never configures structlog; the suite keeps its output to info and above.
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))


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


@pytest.fixture
async def journal(db_path: Path) -> AsyncIterator[Journal]:
    async with Journal(db_path) as j:
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
