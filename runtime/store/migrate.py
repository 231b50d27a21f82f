"""Bring a journal's schema to the revision this bide needs, or refuse it, through Alembic.

One migration history for every database: ``sqlite.migrate`` and ``postgres.migrate`` bring a
file or a database to head through the same steps here (``upgrade``, ``verify``); ``urls.ensure``
picks by URL.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import SchemaError
from runtime.store import names

if TYPE_CHECKING:  # SQLAlchemy and Alembic are imported only to migrate, or to parse a URL
    import sqlalchemy as sa
    from alembic.script import ScriptDirectory

__all__ = ["script_location", "scripts", "upgrade", "verify"]

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
