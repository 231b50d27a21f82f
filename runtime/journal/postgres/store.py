"""The store on PostgreSQL: the same records, keys, order and leases as ``SQLiteStore``, in one
database that many processes and machines share.

Writes go through the group-commit writer (``postgres.Writer``); reads are SQLAlchemy Core
queries on pooled autocommit connections, so they never queue behind a batch. A write that makes
a run ready ``NOTIFY``s in its own transaction, and ``wakeups()`` hears it (``postgres.listen``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import sqlalchemy as sa

from runtime.errors import ConfigError, LeaseLost, RunBusy, StorageError
from runtime.journal import schema
from runtime.journal.codec import decode, encode
from runtime.journal.postgres import leases as L
from runtime.journal.postgres.batch import (
    AppendOp,
    CreateOp,
    IndexOp,
    LeaseOp,
    Op,
)
from runtime.journal.postgres.connect import (
    NOW_MS,
    RECORDS_CHANNEL,
    connection_lost,
    display,
    make_engine,
    postgres_url,
    storage_error,
)
from runtime.journal.postgres.listen import wakeups
from runtime.journal.postgres.migrate import ensure_engine
from runtime.journal.postgres.writer import Writer
from runtime.journal.protocol import (
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
from runtime.journal.sqlite.setup import check_format
from runtime.ownership import Lease, Owner, busy, lost
from runtime.records import CODEC, Appended, Entry, Record

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["PostgresStore"]

_T = TypeVar("_T")

_r, _u, _l = schema.records, schema.runs, schema.leases
_RUN_ID: sa.BindParameter[str] = sa.bindparam("run_id")
_GET = sa.select(_r.c.seq, _r.c.kind, _r.c.codec, _r.c.payload, _r.c.created_ms).where(
    _r.c.run_id == _RUN_ID, _r.c.key == sa.bindparam("key")
)
_LOAD = (
    sa.select(_r.c.seq, _r.c.key, _r.c.kind, _r.c.codec, _r.c.payload, _r.c.created_ms)
    .where(_r.c.run_id == _RUN_ID, _r.c.seq > sa.bindparam("after"))
    .order_by(_r.c.seq)
)
_LOAD_PREFIX = _LOAD.where(
    # starts_with compares bytes whatever the database's collation (a range on key would not).
    sa.func.starts_with(_r.c.key, sa.bindparam("prefix"))
)
_LIVE = sa.and_(sa.not_(_l.c.released), _l.c.expires_ms > sa.literal_column(NOW_MS))
_RUNS = sa.select(
    _u.c.run_id,
    _u.c.format,
    _u.c.status,
    _u.c.agent,
    _u.c.turns,
    _u.c.created_ms,
    _u.c.updated_ms,
    _u.c.detail,
    _l.c.epoch,
    _l.c.owner,
    _l.c.acquired_ms,
    _l.c.expires_ms,
    _l.c.released,
    _LIVE.label("live"),
).select_from(_u.outerjoin(_l, _l.c.run_id == _u.c.run_id))
_ROW = _RUNS.where(_u.c.run_id == _RUN_ID)


_HEADER = encode({"format": schema.FORMAT_VERSION})
"""Every run's header record, as stored (the same for all runs of this format)."""


class PostgresStore:
    """A journal in a PostgreSQL database (the ``Store`` protocol).

    ``await PostgresStore.open("postgresql://user@host/db")``, then ``await store.close()``.
    The URL's password, if any, never appears in a message: ``path`` is the URL without it.
    """

    def __init__(self, path: str, engine: AsyncEngine, writer: Writer):
        self.path = path
        self._engine = engine
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._writer = writer
        self._verified: set[str] = set()
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str | os.PathLike[str],
        *,
        migrate: bool = True,
        allow_foreign: bool = False,
        pool_size: int = 4,
    ) -> Self:
        """Open the journal in the database at ``url``, migrating it to head unless
        ``migrate=False`` (which only verifies it). bide's tables are not added to a database
        that holds other tables unless ``allow_foreign``. A server that cannot be reached, a
        missing database or refused credentials are a ``StorageError`` naming the server."""
        parsed = postgres_url(url)
        where = display(parsed)
        engine = make_engine(parsed, pool_size=pool_size)
        try:
            await ensure_engine(engine, where, migrate=migrate, allow_foreign=allow_foreign)
            writer = Writer(engine, where)
            await writer.start()
        except BaseException:
            await engine.dispose()
            raise
        return cls(where, engine, writer)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._writer.close()
        finally:
            await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def commits(self) -> int:
        """How many transactions the writer has committed (group commit shares them)."""
        return self._writer.commits

    def wakeups(self) -> AsyncIterator[str | None]:
        """The ids of runs made ready (submitted, answered, approved, resolved, released), as
        their writes commit, from any process on this database; ``None`` when the listening
        connection (its own, not the pool's) is made or made again, since what was notified
        while it was away is lost. A lost connection is logged and retried with backoff; the
        iterator ends only when its consumer stops (``Wakeups``)."""
        return wakeups(self._engine.url, self.path)

    def record_wakeups(self) -> AsyncIterator[str | None]:
        """The ids of runs that had records committed, by any process on this database, as
        ``wakeups`` tells ready runs (``None`` on each (re)connection): how followers of a
        run's events hear of its commits (``runtime.events``)."""
        return wakeups(self._engine.url, self.path, RECORDS_CHANNEL)

    # --- writes ----------------------------------------------------------------------------

    async def _submit(self, op: Op) -> Any:
        return await self._writer.submit(op)

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        """Write the run's header (format version) unless the run exists; True if it is new.

        An existing run written in another format is refused with ``FormatError``.
        """
        check_run_id(run_id)
        if agent is not None:
            index_fields({"agent": agent})
        created = bool(await self._submit(CreateOp(run_id, _HEADER, agent, epoch)))
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
        """Insert ``payload`` under ``key`` unless the key exists; return the winner (the
        contract is ``Store.append``'s, ``before`` and ``release`` included)."""
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
        outcome = await self._submit(op)
        self._verified.add(run_id)
        return appended(outcome, run_id, key, payload, before, release)

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None:
        """Update the run's listing row (status, agent, turns, detail). Never touches a record.

        ``unless`` names a key whose record, if present, leaves the row as it is (checked in
        the same transaction).
        """
        await self._submit(IndexOp(run_id, index_fields(fields), unless, epoch))

    # --- leases ----------------------------------------------------------------------------

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        """Grant the run's lease to ``owner`` (the contract is ``Store.acquire``'s), or raise
        ``RunBusy`` naming the holder."""
        check_run_id(run_id)
        values = {
            "run_id": run_id,
            "owner": L.owner_text(owner),
            "host": owner.host,
            "ttl_ms": ttl_ms(ttl),
            "take_over": take_over,
        }

        granted, row = await self._submit(LeaseOp("acquire", run_id, values))
        lease = None if row is None else L.lease_of(run_id, row, owner if granted else None)
        if lease is None:  # pragma: no cover - the upsert either wins or meets a row
            raise StorageError(f"journal {self.path}: the lease of run {run_id!r} vanished")
        if not granted:
            raise busy(lease)
        return lease

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` seconds from now; ``LeaseLost`` if its epoch moved on."""
        values = {"run_id": lease.run_id, "epoch": lease.epoch, "ttl_ms": ttl_ms(ttl)}
        row = await self._submit(LeaseOp("renew", lease.run_id, values))
        renewed = None if row is None else L.lease_of(lease.run_id, row, lease.owner)
        if renewed is None:
            current = await self.lease(lease.run_id)
            raise lost(lease, None if current is None else current.epoch)
        return renewed

    async def release(self, lease: Lease) -> bool:
        """Mark ``lease`` released; False (changing nothing) if its epoch moved on."""
        values = {"run_id": lease.run_id, "epoch": lease.epoch}
        return bool(await self._submit(LeaseOp("release", lease.run_id, values)))

    async def lease(self, run_id: str) -> Lease | None:
        check_query(run_id=run_id)

        async def go(conn: AsyncConnection) -> Any:
            return (await conn.execute(L.READ, {"run_id": run_id})).first()

        row = await self._run(go)
        return None if row is None else L.lease_of(run_id, row)

    async def clock_ms(self) -> int:
        """The journal's clock: the server's, read now (``Store.clock_ms``)."""

        async def go(conn: AsyncConnection) -> Any:
            return (await conn.execute(L.CLOCK)).scalar_one()

        return int(await self._run(go))

    async def claimable(
        self, *, limit: int = 10, host: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        """Runs a worker may drive (``Store.claimable``): orphans first, then runs nobody holds,
        then the live leases of this host; least recently updated first within each."""
        if limit < 1:
            raise ConfigError("limit must be at least 1")

        async def go(conn: AsyncConnection) -> list[Any]:
            return list(await conn.execute(L.CLAIMABLE, {"limit": limit, "host": host}))

        rows = await self._run(go)
        return [(row[0], L.lease_of(row[0], row[1:])) for row in rows]

    # --- reads -----------------------------------------------------------------------------

    async def _run(
        self,
        fn: Callable[[AsyncConnection], Awaitable[_T]],
        *,
        doing: str = "cannot read",
    ) -> _T:
        """``fn`` on a pooled autocommit connection, once more on a fresh one if the server had
        dropped the first: every use is a single read, so a retry repeats nothing."""
        if self._closed:
            raise StorageError(f"journal {self.path} is closed")
        for retry in (True, False):
            try:
                async with self._reads.connect() as conn:
                    return await fn(conn)
            except (StorageError, RunBusy, LeaseLost):
                raise
            except Exception as exc:
                if retry and connection_lost(exc):
                    continue
                raise storage_error(self.path, exc, doing=doing) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _fetch(self, statement: sa.Executable, values: Mapping[str, Any]) -> list[Any]:
        async def go(conn: AsyncConnection) -> list[Any]:
            return list(await conn.execute(statement, dict(values)))

        return await self._run(go)

    async def get(self, run_id: str, key: str) -> Record | None:
        check_query(run_id=run_id, key=key)
        rows = await self._fetch(_GET, {"run_id": run_id, "key": key})
        if not rows:
            return None
        if run_id not in self._verified and key != "header":
            await self.check_run(run_id)
        seq, kind, codec, text, created_ms = rows[0]
        value = decode(codec, text, run_id=run_id, key=key, seq=seq)
        return Record(seq, run_id, key, kind, value, created_ms, codec)

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        check_query(run_id=run_id)
        rows = await self._fetch(_GET, {"run_id": run_id, "key": "header"})
        if not rows:
            return False
        check_format(run_id, rows[0][3])
        self._verified.add(run_id)
        return True

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        """The run's records in commit order, those with ``seq > after`` only if given, and
        those whose keys start with ``prefix`` only if given.

        The header is checked before any other record is decoded: a run in an unknown format
        raises ``FormatError`` and nothing of it is returned.
        """
        if run_id not in self._verified and not await self.check_run(run_id):
            return []
        if prefix is None:
            rows = await self._fetch(_LOAD, {"run_id": run_id, "after": after})
        elif not prefix:
            raise ConfigError("a key prefix is a non-empty string")
        else:
            check_query(prefix=prefix)
            values = {"run_id": run_id, "after": after, "prefix": prefix}
            rows = await self._fetch(_LOAD_PREFIX, values)
        return [
            Record(
                seq,
                run_id,
                key,
                kind,
                decode(codec, text, run_id=run_id, key=key, seq=seq),
                ms,
                codec,
            )
            for seq, key, kind, codec, text, ms in rows
        ]

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
        query = _RUNS
        if status is not None:
            query = query.where(_u.c.status == status)
        if prefix:
            escaped = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
            query = query.where(_u.c.run_id.like(escaped + "%", escape="/"))
        if before is not None:
            cursor = sa.tuple_(*(sa.literal(v) for v in parse_cursor(before)))
            query = query.where(sa.tuple_(_u.c.created_ms, _u.c.run_id) < cursor)
        query = query.order_by(_u.c.created_ms.desc(), _u.c.run_id.desc()).limit(limit + 1)
        rows = await self._fetch(query, {})
        runs = [_run_row(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = runs[-1]
            next_cursor = f"{last.created_ms}:{last.run_id}"
        return RunPage(runs, next_cursor)

    async def run_row(self, run_id: str) -> RunRow | None:
        """The run's row in the index, if the run exists."""
        check_query(run_id=run_id)
        rows = await self._fetch(_ROW, {"run_id": run_id})
        return _run_row(rows[0]) if rows else None


def _run_row(row: Any) -> RunRow:
    run_id, fmt, status, agent, turns, created_ms, updated_ms, detail = row[:8]
    return RunRow(
        run_id,
        fmt,
        status,
        agent,
        turns,
        created_ms,
        updated_ms,
        json.loads(detail) if detail else None,
        L.lease_of(run_id, row[8:]),
    )
