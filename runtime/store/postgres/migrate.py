"""The journal's schema on PostgreSQL: the shared Alembic history (``runtime.store.migrate``),
run on an asyncpg connection, one upgrader at a time.

Concurrent first opens from many processes take turns on a session advisory lock; each finds
the schema at head once its turn comes, and the upgrade itself is one transaction (PostgreSQL's
DDL is transactional), so a crash mid-upgrade leaves the previous revision intact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from runtime.errors import StorageError
from runtime.store import migrate as shared
from runtime.store import schema
from runtime.store.postgres.connect import (
    MIGRATE_LOCK,
    display,
    make_engine,
    postgres_url,
    storage_error,
)

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["ensure_engine", "ensure_url"]

_EXISTS = sa.text("SELECT to_regclass(:table) IS NOT NULL")
_HEAD = sa.text(f"SELECT max(version_num) FROM {schema.VERSION_TABLE}")
_LOCK = sa.text(f"SELECT pg_advisory_lock({MIGRATE_LOCK})")
_UNLOCK = sa.text(f"SELECT pg_advisory_unlock({MIGRATE_LOCK})")


async def ensure_url(url: str, *, migrate: bool, allow_foreign: bool = False) -> str:
    """``ensure_engine`` on a short-lived engine of its own; returns the redacted URL."""
    parsed = postgres_url(url)
    where = display(parsed)
    engine = make_engine(parsed, pool_size=1)
    try:
        await ensure_engine(engine, where, migrate=migrate, allow_foreign=allow_foreign)
    finally:
        await engine.dispose()
    return where


async def ensure_engine(
    engine: AsyncEngine, where: str, *, migrate: bool, allow_foreign: bool = False
) -> None:
    """Migrate the database to head, or with ``migrate=False`` verify that it is there.

    A schema from a newer bide is refused either way (``SchemaError``), and so, unless
    ``allow_foreign``, is a database that already holds other programs' tables.
    """
    try:
        async with engine.connect() as conn:
            if await _at_head(conn):
                return
            if not migrate:
                await conn.run_sync(shared.verify, where)
                return
            await conn.execute(_LOCK)
            await conn.commit()
            try:
                await conn.run_sync(_upgrade, where, allow_foreign)
            finally:
                await conn.execute(_UNLOCK)
                await conn.commit()
    except StorageError:
        raise
    except Exception as exc:
        raise storage_error(where, exc, doing="cannot open the journal") from exc


async def _at_head(conn: AsyncConnection) -> bool:
    # The common case, without importing Alembic: one query.
    current = None
    if (await conn.execute(_EXISTS, {"table": schema.VERSION_TABLE})).scalar():
        current = (await conn.execute(_HEAD)).scalar()
    await conn.rollback()
    return bool(current == schema.HEAD_REVISION)


def _upgrade(conn: sa.Connection, where: str, allow_foreign: bool) -> None:
    shared.upgrade(conn, where, allow_foreign=allow_foreign)
