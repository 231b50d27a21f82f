"""Where a schedule's journal lives: a SQLite file in its directory, or a PostgreSQL database of
its own on the test server (``tests/postgres/server.py``), created empty and dropped afterwards.

Either way the schedule's first child creates the schema (Alembic, as a user's first open does),
so a kill during the journal's creation is a schedule like any other. The location is a string
every child takes as ``--db``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

from tests.postgres import server

__all__ = ["BACKENDS", "has_schema", "integrity", "located"]

BACKENDS = ("sqlite", "postgres")


async def _admin(statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(server.ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def located(backend: str, directory: Path) -> AsyncIterator[str]:
    """The journal location of one schedule, for the block."""
    if backend == "sqlite":
        yield str(directory / "bide.db")
        return
    if backend != "postgres":
        raise ValueError(f"unknown journal backend {backend!r}")
    name = server.fresh_name("crash")
    await _admin(f"CREATE DATABASE {name} TEMPLATE template0")
    try:
        yield server.url_of(name)
    finally:
        await _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgresql+asyncpg://"))


async def has_schema(db: str) -> bool:
    """Whether a child got as far as creating the journal's schema (a peek, never a write)."""
    if _is_postgres(db):
        import asyncpg

        conn = await asyncpg.connect(db.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return await conn.fetchval("SELECT to_regclass('bide_records') IS NOT NULL")  # type: ignore[no-any-return]
        finally:
            await conn.close()
    if not Path(db).exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        try:
            conn.execute("SELECT 1 FROM bide_records LIMIT 1")
        except sqlite3.OperationalError:
            return False
    return True


def integrity(db: str) -> str:
    """``ok``, or what the database says is damaged. SQLite checks its file; a PostgreSQL
    database has no such check to ask for (its records are read back and parsed instead)."""
    if _is_postgres(db):
        return "ok"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (verdict,) = conn.execute("PRAGMA integrity_check").fetchone()
    return str(verdict)
