"""The store over one SQLite file: per-run append-only records with insert-if-absent keys.

Writes go through the group-commit writer (``sqlite.Writer``). Reads are SQLAlchemy Core selects
written out as SQL (``sqlite.queries``), run on standard-library connections of their own in
worker threads (``sqlite.Readers``), so they never queue behind writes nor block the event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from typing import Any, Self

from runtime.errors import ConfigError
from runtime.ownership import Lease, boot_id
from runtime.records import Record
from runtime.store.checks import check_query
from runtime.store.codec import decode
from runtime.store.decide import Row
from runtime.store.front import JudgedLeases, StoreFront, lease_row, like_prefix
from runtime.store.leases import boot_pattern, lease_of, now_ms
from runtime.store.ops import Op
from runtime.store.protocol import RunRow
from runtime.store.queuefront import QueueFront
from runtime.store.sqlite.migrate import ensure_schema
from runtime.store.sqlite.queries import CLAIMABLE, GET, LEASE, LIST, LOAD, LOAD_PREFIX, ROW
from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, Readers
from runtime.store.sqlite.writer import Writer
from runtime.store.urls import sqlite_path

__all__ = ["SQLiteStore"]


class SQLiteStore(JudgedLeases, QueueFront, StoreFront):
    """A journal in one SQLite file (the ``Store`` protocol). ``await SQLiteStore.open(url)``,
    then ``await store.close()``."""

    def __init__(self, path: str, readers: Readers, writer: Writer):
        super().__init__()
        self.path = path
        self._readers = readers
        self._writer = writer

    @classmethod
    async def open(
        cls,
        url: str | os.PathLike[str],
        *,
        migrate: bool = True,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        allow_foreign: bool = False,
    ) -> Self:
        """Open the journal at ``url``, migrating it to head unless ``migrate=False``.

        A new file is created mode 0600. A file that is not a bide journal (not SQLite, damaged,
        or another program's database) is refused with a ``SchemaError``; ``allow_foreign``
        lets bide add its tables beside another program's.
        """
        path = sqlite_path(url)
        directory = os.path.dirname(path)
        if migrate and not os.path.isdir(directory):
            raise ConfigError(f"cannot create journal {path}: no directory {directory}")
        await asyncio.to_thread(
            ensure_schema,
            path,
            migrate=migrate,
            busy_timeout_ms=busy_timeout_ms,
            allow_foreign=allow_foreign,
        )
        readers = Readers(path, busy_timeout_ms=busy_timeout_ms)
        writer = Writer(path, busy_timeout_ms=busy_timeout_ms)
        try:
            await writer.start()
        except BaseException:
            readers.close()
            raise
        return cls(path, readers, writer)

    async def close(self) -> None:
        await self._writer.close()
        self._readers.close()

    @property
    def commits(self) -> int:
        """How many transactions the writer has committed (group commit shares them)."""
        return self._writer.commits

    def _submit(self, op: Op) -> Any:
        return self._writer.submit(op)

    # --- reads -----------------------------------------------------------------------------

    async def _fetch_record(self, run_id: str, key: str) -> Row | None:
        row = await self._readers.run(_fetchone, GET.sql, GET.params(run_id=run_id, key=key))
        return None if row is None else tuple(row)

    async def _fetch_records(self, run_id: str, after: int, prefix: str | None) -> list[Record]:
        if prefix is None:
            return await self._readers.run(_load, run_id, LOAD.params(run_id=run_id, after=after))
        low, high = prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
        params = LOAD_PREFIX.params(run_id=run_id, after=after, low=low, high=high)
        return await self._readers.run(_load, run_id, params, LOAD_PREFIX.sql)

    async def _fetch_runs(
        self, status: str | None, prefix: str | None, limit: int, before: tuple[int, str] | None
    ) -> list[RunRow]:
        values: dict[str, Any] = {"limit": limit, "status": status}
        if prefix is not None:
            values["pattern"] = like_prefix(prefix)
        if before is not None:
            values["before_ms"], values["before_id"] = before
        query = LIST[(status is not None, prefix is not None, before is not None)]
        rows = await self._readers.run(_fetchall, query.sql, query.params(**values))
        return [_run_row(row) for row in rows]

    async def _fetch_run(self, run_id: str) -> RunRow | None:
        row = await self._readers.run(_fetchone, ROW.sql, ROW.params(run_id=run_id))
        return None if row is None else _run_row(row)

    async def lease(self, run_id: str) -> Lease | None:
        """The run's lease as it stands, if a drive ever took one."""
        check_query(run_id=run_id)
        row = await self._readers.run(_fetchone, LEASE.sql, LEASE.params(run_id=run_id))
        return None if row is None else _read(run_id, row, now_ms())

    async def clock_ms(self) -> int:
        """The journal's clock (``leases.now_ms``): what leases and settle times are judged on."""
        return now_ms()

    # --- queues (store.queues) -------------------------------------------------------------

    async def _queue_read(self, sql: str, params: dict[str, Any]) -> list[Any]:
        return await self._readers.run(_fetchall_named, sql, params)

    async def claimable(
        self, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        """Runs a worker may claim (see ``Store``): orphans first, then runs nobody holds, then
        the live leases of this host; least recently updated first within each."""
        now = now_ms()
        boot = boot_pattern()
        params = CLAIMABLE.params(
            now=now,
            now2=now,
            due_now=now,
            clock=boot_id(),
            host=host,
            boot=boot,
            boot2=boot,
            agent=agent,
            agent2=agent,
            limit=limit,
        )
        rows = await self._readers.run(_fetchall, CLAIMABLE.sql, params)
        return [(row[0], None if row[1] is None else _read(row[0], row[1:], now)) for row in rows]


def _read(run_id: str, row: Any, now: int) -> Lease:
    """A lease from a read: epoch, owner, acquired, expires, released."""
    return lease_of(run_id, lease_row(*row), now)


def _run_row(row: Any) -> RunRow:
    run_id, fmt, status, agent, turns, created_ms, updated_ms, detail, *held = row
    lease = None if held[0] is None else _read(run_id, held, now_ms())
    return RunRow(
        run_id,
        fmt,
        status,
        agent,
        turns,
        created_ms,
        updated_ms,
        json.loads(detail) if detail else None,
        lease,
    )


def _fetchone(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    return conn.execute(sql, params).fetchone()


def _fetchall(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _load(
    conn: sqlite3.Connection, run_id: str, params: tuple[Any, ...], sql: str = LOAD.sql
) -> list[Record]:
    # Decoded in the reader's thread, straight from the cursor: one pass, no row objects.
    rows = conn.execute(sql, params)
    return [
        Record(
            seq, run_id, key, kind, decode(codec, text, run_id=run_id, key=key, seq=seq), ms, codec
        )
        for seq, key, kind, codec, text, ms in rows
    ]


def _fetchall_named(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    return conn.execute(sql, params).fetchall()
