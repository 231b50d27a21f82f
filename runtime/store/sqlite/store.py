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
from collections.abc import Mapping, Sequence
from typing import Any, Self

from runtime.errors import ConfigError
from runtime.ownership import Lease, Owner, busy, lost
from runtime.records import CODEC, Appended, Entry, Record
from runtime.store import names
from runtime.store.codec import decode, encode
from runtime.store.migrate import ensure_schema, sqlite_path
from runtime.store.protocol import (
    RunPage,
    RunRow,
    appended,
    check_appended,
    check_query,
    check_release,
    check_run_id,
    index_fields,
    parse_cursor,
    ttl_ms,
)
from runtime.store.sqlite.batch import AppendOp, CreateOp, IndexOp, LeaseOp
from runtime.store.sqlite.leases import boot_pattern, lease_of, now_ms, owner_text
from runtime.store.sqlite.queries import CLAIMABLE, GET, LEASE, LIST, LOAD, LOAD_PREFIX, ROW
from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, Readers, check_format
from runtime.store.sqlite.writer import Writer

__all__ = ["SQLiteStore"]


_HEADER = encode({"format": names.FORMAT_VERSION})
"""Every run's header record, as stored (the same for all runs of this format)."""


class SQLiteStore:
    """A journal in one SQLite file (the ``Store`` protocol). ``await SQLiteStore.open(url)``,
    then ``await store.close()``."""

    def __init__(self, path: str, readers: Readers, writer: Writer):
        self.path = path
        self._readers = readers
        self._writer = writer
        self._verified: set[str] = set()

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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def commits(self) -> int:
        """How many transactions the writer has committed (group commit shares them)."""
        return self._writer.commits

    # --- writes ----------------------------------------------------------------------------

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        """Write the run's header (format version) unless the run exists; True if it is new.

        An existing run written in another format is refused with ``FormatError``.
        """
        check_run_id(run_id)
        if agent is not None:
            index_fields({"agent": agent})
        created = bool(await self._writer.submit(CreateOp(run_id, _HEADER, agent, epoch)))
        self._verified.add(run_id)
        return created

    async def append(
        self,
        run_id: str,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | tuple[str, ...] | None = None,
        watch: str | None = None,
        index: Mapping[str, Any] | None = None,
        epoch: int | None = None,
        before: Sequence[Entry] = (),
        release: bool = False,
    ) -> Appended:
        """Insert ``payload`` under ``key`` unless the key exists; return the winner.

        Of two writers of one key exactly one wins and both get the winning record. ``unless``
        names keys whose presence refuses the insert (checked in the same transaction);
        ``watch`` names a key whose presence is reported back; ``index`` updates the run's row
        in the derived index in the same transaction. Given ``epoch``, the append is refused
        with ``LeaseLost`` unless the run's lease still has that epoch. ``before`` records are
        written first in the same transaction, all or none (``Store.append``); ``release``
        releases the lease of ``epoch`` with it.
        """
        check_release(release, epoch)
        check_appended(run_id, key, kind, unless, watch, before)
        op = AppendOp(
            run_id,
            key,
            kind,
            CODEC,
            encode(payload),
            unless=(unless,) if isinstance(unless, str) else unless,
            watch=watch,
            check_header=run_id not in self._verified,
            index=index_fields(index) if index else None,
            epoch=epoch,
            before=tuple((e.key, e.kind, encode(e.payload)) for e in before),
            release=release,
        )
        outcome = await self._writer.submit(op)
        self._verified.add(run_id)
        return appended(outcome, run_id, key, payload, before, release)

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None:
        """Update the run's listing row (status, agent, turns, detail). Never touches a record.

        ``unless`` names a key whose record, if present, leaves the row as it is (checked in
        the same transaction).
        """
        await self._writer.submit(IndexOp(run_id, index_fields(fields), unless, epoch))

    # --- leases (on the writer's clock) ----------------------------------------------------

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        """The run's lease for ``owner``, or ``RunBusy`` naming the live holder."""
        check_run_id(run_id)
        op = LeaseOp("acquire", run_id, take_over, owner_text(owner), owner.host, ttl_ms(ttl))
        granted, row, now = await self._writer.submit(op)
        if not granted:
            raise busy(_held(run_id, row, now))
        return _held(run_id, row, now, owner)

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` from now; ``LeaseLost`` if another owner took it."""
        op = LeaseOp("renew", lease.run_id, lease.epoch, ttl_ms=ttl_ms(ttl))
        renewed, row, now = await self._writer.submit(op)
        if not renewed:
            raise lost(lease, None if row is None else row[0])
        return _held(lease.run_id, row, now, lease.owner)

    async def release(self, lease: Lease) -> bool:
        """Release ``lease``; False (nothing changed) if another owner holds the run now."""
        released, _row, _now = await self._writer.submit(
            LeaseOp("release", lease.run_id, lease.epoch)
        )
        return bool(released)

    # --- reads -----------------------------------------------------------------------------

    async def get(self, run_id: str, key: str) -> Record | None:
        check_query(run_id=run_id, key=key)
        params = GET.params(run_id=run_id, key=key)
        row = await self._readers.run(_fetchone, GET.sql, params)
        if row is None:
            return None
        if run_id not in self._verified and key != "header":
            await self.check_run(run_id)
        seq, kind, codec, text, created_ms = row
        value = decode(codec, text, run_id=run_id, key=key, seq=seq)
        return Record(seq, run_id, key, kind, value, created_ms, codec)

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        check_query(run_id=run_id)
        params = GET.params(run_id=run_id, key="header")
        row = await self._readers.run(_fetchone, GET.sql, params)
        if row is None:
            return False
        check_format(run_id, row[3])
        self._verified.add(run_id)
        return True

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        """The run's records in commit order, those with ``seq > after`` only if given, and
        those whose keys start with ``prefix`` only if given.

        The header is checked before any other record is decoded: a run in an unknown format
        raises ``FormatError`` and nothing of it is returned; so does a damaged record, with
        ``CorruptJournal``.
        """
        if run_id not in self._verified and not await self.check_run(run_id):
            return []
        if prefix is None:
            return await self._readers.run(_load, run_id, LOAD.params(run_id=run_id, after=after))
        if not prefix:
            raise ConfigError("a key prefix is a non-empty string")
        check_query(prefix=prefix)
        low, high = prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
        params = LOAD_PREFIX.params(run_id=run_id, after=after, low=low, high=high)
        return await self._readers.run(_load, run_id, params, LOAD_PREFIX.sql)

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        """Runs newest first, filtered by index status and run-id prefix, one page at a time."""
        check_query(status=status, prefix=prefix, cursor=before)
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        values: dict[str, Any] = {"limit": limit + 1, "status": status}
        if prefix:
            escaped = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
            values["pattern"] = escaped + "%"
        if before is not None:
            values["before_ms"], values["before_id"] = parse_cursor(before)
        query = LIST[(status is not None, bool(prefix), before is not None)]
        rows = await self._readers.run(_fetchall, query.sql, query.params(**values))
        runs = [_run_row(row) for row in rows[:limit]]
        cursor = None
        if len(rows) > limit:
            last = runs[-1]
            cursor = f"{last.created_ms}:{last.run_id}"
        return RunPage(runs, cursor)

    async def run_row(self, run_id: str) -> RunRow | None:
        """The run's row in the index, if the run exists."""
        check_query(run_id=run_id)
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

    async def claimable(
        self, *, limit: int = 10, host: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        """Runs a worker may claim (see ``Store``): orphans first, then runs nobody holds, then
        the live leases of this host; least recently updated first within each."""
        now = now_ms()
        boot = boot_pattern()
        params = CLAIMABLE.params(now=now, now2=now, host=host, boot=boot, boot2=boot, limit=limit)
        rows = await self._readers.run(_fetchall, CLAIMABLE.sql, params)
        return [(row[0], None if row[1] is None else _read(row[0], row[1:], now)) for row in rows]


def _held(run_id: str, row: Any, now: int, owner: Owner | None = None) -> Lease:
    """A lease from the writer's row: epoch, owner, host, acquired, expires, released."""
    return lease_of(run_id, tuple(row), now, owner)


def _read(run_id: str, row: Any, now: int) -> Lease:
    """A lease from a read: epoch, owner, acquired, expires, released."""
    epoch, owner, acquired_ms, expires_ms, released = row
    return _held(run_id, (epoch, owner, None, acquired_ms, expires_ms, released), now)


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
