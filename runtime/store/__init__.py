"""Storage under the journal: the ``Store`` protocol and the rules every store keeps, written once
(``decide``), over SQLite (``sqlite``), PostgreSQL (``postgres``) or memory (``memory``).

``runtime.journal`` is the handle people use; this package is what it stands on:

- ``protocol``: the ``Store`` protocol; ``checks``: what every store checks at its boundary;
  ``codec``: payloads as stored.
- ``ops``: a batch's ops; ``decide``: what each one does (the rules, once); ``leases``: the
  lease rule of the stores that decide leases in Python; ``front``: the ``Store`` calls made the
  same way by every store. ``queues``: queues' limits and the claim rule that keeps them,
  schedules' rows, written once for every store (``queuefront`` makes their calls).
- ``sqlite/``, ``postgres/``: connections, SQL, writer, migrations, and nothing else; neither
  imports the other. ``memory``: the same rules over dicts. ``migrate``: Alembic's steps,
  shared; ``names``, ``schema``: the tables.

And here, the one place that picks a store for a journal URL: ``open_store``, ``ensure``
(migrate or verify), ``exists``, ``local_file``. Each backend is imported only when a URL names it.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from runtime.store.urls import is_postgres_url, sqlite_path

if TYPE_CHECKING:
    from runtime.store.protocol import Store

__all__ = ["ensure", "exists", "local_file", "open_store"]


async def open_store(
    url: str | os.PathLike[str], *, migrate: bool = True, busy_timeout_ms: int | None = None
) -> Store:
    """The store for the journal at ``url``, open (and migrated to head unless ``migrate=False``):
    ``PostgresStore`` for a ``postgresql://`` URL, else ``SQLiteStore`` for the file (waiting up
    to ``busy_timeout_ms`` for another connection's lock, if given)."""
    if is_postgres_url(url):
        from runtime.store.postgres.store import PostgresStore

        return await PostgresStore.open(url, migrate=migrate)
    from runtime.store.sqlite.store import SQLiteStore

    if busy_timeout_ms is None:
        return await SQLiteStore.open(url, migrate=migrate)
    return await SQLiteStore.open(url, migrate=migrate, busy_timeout_ms=busy_timeout_ms)


async def ensure(url: str, *, migrate: bool, allow_foreign: bool = False) -> str:
    """Migrate (or with ``migrate=False`` verify) the journal at ``url``, a SQLite file or a
    PostgreSQL database; return where it is, fit for a message."""
    if is_postgres_url(url):
        from runtime.store.postgres.migrate import ensure_url

        return await ensure_url(url, migrate=migrate, allow_foreign=allow_foreign)
    from runtime.store.sqlite.migrate import ensure_schema

    path = sqlite_path(url)
    await asyncio.to_thread(ensure_schema, path, migrate=migrate, allow_foreign=allow_foreign)
    return path


def local_file(url: str | os.PathLike[str]) -> str | None:
    """The file that holds the journal at ``url`` (a SQLite journal), or None when a database
    server holds it."""
    return None if is_postgres_url(url) else sqlite_path(url)


def exists(url: str | os.PathLike[str]) -> bool:
    """Whether there may be a journal at ``url`` to read: its file exists; a database server's
    is asked when it is opened."""
    path = local_file(url)
    return path is None or os.path.exists(path)
