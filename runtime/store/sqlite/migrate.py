"""A SQLite file's schema: created private, migrated to head through Alembic's steps
(``store.migrate``) under SQLite's write lock, or refused when it is not a bide journal."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from typing import TYPE_CHECKING, Any

from runtime.errors import ConfigError, SchemaError
from runtime.store import names
from runtime.store.migrate import scripts, upgrade, verify
from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, configure
from runtime.store.urls import sqlite_path

if TYPE_CHECKING:  # SQLAlchemy is imported only to migrate
    import sqlalchemy as sa

__all__ = ["damage", "ensure_schema", "migration_engine"]


def migration_engine(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sa.Engine:
    """A synchronous engine whose transactions take SQLite's write lock when they begin.

    ``BEGIN IMMEDIATE`` serialises two processes migrating one new file: the second waits for
    the first, then finds the schema at head and does nothing.
    """
    import sqlalchemy as sa

    path = sqlite_path(url)
    engine = sa.create_engine(
        "sqlite://",
        # The file by name: a URL would read `?` as a query and `%41` as "A".
        creator=lambda: sqlite3.connect(path, isolation_level=None),
        poolclass=sa.pool.NullPool,
    )

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        configure(dbapi_connection, busy_timeout_ms=busy_timeout_ms)

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def ensure_schema(
    path: str,
    *,
    migrate: bool,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    allow_foreign: bool = False,
) -> None:
    """Migrate the file at ``path`` to head, or with ``migrate=False`` verify that it is there.

    A schema from a newer bide (a revision this one does not ship) is refused either way, and so
    is a file that is not SQLite or is damaged. A new journal file is created mode 0600 (it holds
    inputs, results and tool outputs; SQLite gives its ``-wal`` and ``-shm`` files the same
    mode); an existing file keeps its mode. bide's tables are never added to a database that
    holds other tables unless ``allow_foreign``.
    """
    if migrate:
        _create_private(path)
    if _at_head(path, busy_timeout_ms):
        return  # the common case, without importing Alembic
    _, head = scripts()
    if not migrate and not os.path.exists(path):
        raise SchemaError(
            f"no journal at {path}; this bide needs schema revision {head}. Open it with "
            "migrate=True or run `python -m runtime migrate` to create it."
        )
    import sqlalchemy as sa

    engine = migration_engine(path, busy_timeout_ms=busy_timeout_ms)
    try:
        with engine.connect() as conn:
            if migrate:
                upgrade(conn, path, allow_foreign=allow_foreign)
            else:
                verify(conn, path)
    except sa.exc.DBAPIError as exc:
        if _is_damage(exc.orig):
            raise _damaged(path, exc.orig) from exc
        raise SchemaError(f"journal {path}: cannot migrate: {exc.orig}") from exc
    finally:
        engine.dispose()


def _create_private(path: str) -> None:
    """Create the journal file empty, mode 0600, unless it exists (SQLite takes an empty file as
    a new database). Only the owner may read a journal, from its first byte on."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise ConfigError(f"cannot create journal {path}: {exc.strerror or exc}") from exc
    os.close(fd)


def _is_damage(exc: BaseException | None) -> bool:
    # "file is not a database", "database disk image is malformed": not SQLite, or not intact.
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(
        exc, sqlite3.OperationalError | sqlite3.IntegrityError | sqlite3.ProgrammingError
    )


def _damaged(path: str, exc: BaseException | None) -> SchemaError:
    return SchemaError(f"{path} is not a bide journal or is damaged (sqlite: {exc})")


def damage(path: str) -> str | None:
    """What SQLite finds wrong with the file (``PRAGMA quick_check``, read-only), or None when it
    is an intact SQLite database. For diagnosing a storage error after the fact: it reads the
    whole file."""
    try:
        conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return None  # busy or unreadable for another reason: not evidence of damage
    except sqlite3.DatabaseError as exc:
        return str(exc)
    found = " ".join(str(r[0]) for r in rows).replace("*** in database main ***", "").strip()
    return None if found == "ok" else found


def _at_head(path: str, busy_timeout_ms: int) -> bool:
    """Whether the file exists and its schema is at this bide's head revision (read-only peek)."""
    if not os.path.exists(path):
        return False
    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000)
        try:
            row = conn.execute(f"SELECT version_num FROM {names.VERSION_TABLE}").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        if _is_damage(exc):
            raise _damaged(path, exc) from exc
        return False  # no bide schema yet, or busy: the migrator waits for the lock and decides
    return row is not None and row[0] == names.HEAD_REVISION
