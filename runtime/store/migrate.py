"""Bring a journal's schema to the revision this bide needs, or refuse it, through Alembic.

One migration history for both databases: ``ensure_schema`` does it for a SQLite file, and
``postgres.migrate`` for a PostgreSQL database through the same steps (``upgrade``, ``verify``);
``ensure`` picks by URL.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ConfigError, SchemaError
from runtime.store import names
from runtime.store.sqlite import BUSY_TIMEOUT_MS, configure
from runtime.store.urls import is_postgres_url, sqlite_path

if TYPE_CHECKING:  # SQLAlchemy and Alembic are imported only to migrate, or to parse a URL
    import sqlalchemy as sa
    from alembic.script import ScriptDirectory

__all__ = [
    "damage",
    "ensure",
    "ensure_schema",
    "migration_engine",
    "script_location",
    "scripts",
    "sqlite_path",
    "upgrade",
    "verify",
]

_BIDE_TABLES = frozenset(
    {names.VERSION_TABLE, names.records.name, names.runs.name, names.leases.name}
)


def script_location() -> str:
    """Where the Alembic scripts are: inside the installed package, or the source checkout."""
    from importlib import resources  # it brings tempfile, shutil, zipfile: only to migrate

    try:
        return str(resources.files("runtime._migrations"))
    except ModuleNotFoundError:
        return str(Path(__file__).resolve().parents[2] / "migrations")


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


async def ensure(url: str, *, migrate: bool, allow_foreign: bool = False) -> str:
    """Migrate (or with ``migrate=False`` verify) the journal at ``url``, a SQLite file or a
    PostgreSQL database; return where it is, fit for a message."""
    if is_postgres_url(url):
        from runtime.store.postgres import migrate as pg_migrate

        return await pg_migrate.ensure_url(url, migrate=migrate, allow_foreign=allow_foreign)
    path = sqlite_path(url)
    await asyncio.to_thread(ensure_schema, path, migrate=migrate, allow_foreign=allow_foreign)
    return path


def scripts() -> tuple[ScriptDirectory, str]:
    """The shipped Alembic scripts, and their head revision (the one this bide needs)."""
    from alembic.script import ScriptDirectory

    found = ScriptDirectory(script_location())
    head = found.get_current_head()
    if head != names.HEAD_REVISION:  # pragma: no cover - a packaging mistake
        raise SchemaError(f"shipped migrations end at {head}, code expects {names.HEAD_REVISION}")
    assert head is not None
    return found, head


_ALEMBIC = threading.Lock()
"""Alembic's ``context`` and ``op`` are process-wide: two upgrades at once in one process (two
new journals opened together, each in its own thread) would overwrite each other's."""


def upgrade(conn: sa.Connection, where: str, *, allow_foreign: bool) -> None:
    """Bring the database on ``conn`` to head in one transaction, or refuse it (a newer bide's
    schema, another program's tables). The caller serialises concurrent upgraders."""
    from alembic import command
    from alembic.config import Config

    shipped, head = scripts()
    with conn.begin():
        current = _current(conn)
        if current == head:
            return
        _refuse_unknown(shipped, current, head, where)
        if current is None and not allow_foreign:
            _refuse_foreign(conn, where)
        config = Config()
        config.set_main_option("script_location", script_location())
        config.attributes["connection"] = conn
        with _ALEMBIC:
            command.upgrade(config, "head")


def verify(conn: sa.Connection, where: str) -> None:
    """Refuse the database on ``conn`` unless its schema is at head; change nothing."""
    shipped, head = scripts()
    _verify(conn, shipped, head, where)


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


def _foreign_tables(conn: sa.Connection) -> list[str]:
    if conn.dialect.name != "sqlite":
        import sqlalchemy as sa

        inspector = sa.inspect(conn)
        found = sorted({*inspector.get_table_names(), *inspector.get_view_names()})
        return [n for n in found if n not in _BIDE_TABLES]
    names = conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).scalars()
    return [n for n in names if n not in _BIDE_TABLES]


def _refuse_foreign(conn: sa.Connection, path: str) -> None:
    foreign = _foreign_tables(conn)
    if foreign:
        raise SchemaError(
            f"{path} is not a bide journal: it holds other tables ({', '.join(foreign[:5])}"
            f"{', ...' if len(foreign) > 5 else ''}), and bide does not add its tables to another "
            "program's database. Name a new one, or share this one on purpose with "
            "`migrate --allow-foreign` (in code: open the store with allow_foreign=True)."
        )


def _current(conn: sa.Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": names.VERSION_TABLE})
    return context.get_current_revision()


def _refuse_unknown(scripts: ScriptDirectory, current: str | None, head: str, path: str) -> None:
    if current is None:
        return
    try:
        scripts.get_revision(current)
    except Exception as exc:
        raise SchemaError(
            f"journal {path} has schema revision {current}, written by a newer bide; this bide "
            f"knows revisions up to {head}. Upgrade bide to open it."
        ) from exc


def _verify(conn: sa.Connection, scripts: ScriptDirectory, head: str, path: str) -> None:
    current = _current(conn)
    conn.rollback()
    _refuse_unknown(scripts, current, head, path)
    if current != head:
        found = "no bide schema" if current is None else f"schema revision {current}"
        if current is None and (foreign := _foreign_tables(conn)):
            found += f" (it is another program's database: {', '.join(foreign[:5])})"
        raise SchemaError(
            f"journal {path} has {found}; this bide needs revision {head}. Open it with "
            "migrate=True or run `python -m runtime migrate`."
        )
