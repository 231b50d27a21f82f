"""The store on PostgreSQL: the same records, keys, order and leases as ``SQLiteStore``, in one
database that many processes and machines share.

Writes go through the group-commit writer (``postgres.Writer``); reads are SQLAlchemy Core
queries on pooled autocommit connections, so they never queue behind a batch. A write that makes
a run ready ``NOTIFY``s in its own transaction, and ``wakeups()`` hears it (``postgres.listen``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

import sqlalchemy as sa

from runtime.errors import ConfigError, LeaseLost, RunBusy, StorageError
from runtime.ownership import Lease, Owner, busy, lost
from runtime.records import Record
from runtime.store import schema
from runtime.store.checks import check_query, check_run_id, ttl_ms
from runtime.store.codec import decode
from runtime.store.decide import Row
from runtime.store.front import StoreFront, like_prefix
from runtime.store.ops import LeaseOp, Op
from runtime.store.postgres import leases as L
from runtime.store.postgres import queues as Q
from runtime.store.postgres.connect import (
    NOW_MS,
    RECORDS_CHANNEL,
    connection_lost,
    display,
    make_engine,
    postgres_url,
    storage_error,
)
from runtime.store.postgres.listen import wakeups
from runtime.store.postgres.migrate import ensure_engine
from runtime.store.postgres.writer import Writer
from runtime.store.protocol import RunRow
from runtime.store.queuefront import QueueFront

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


class PostgresStore(QueueFront, StoreFront):
    """A journal in a PostgreSQL database (the ``Store`` protocol).

    ``await PostgresStore.open("postgresql://user@host/db")``, then ``await store.close()``.
    The URL's password, if any, never appears in a message: ``path`` is the URL without it.
    """

    def __init__(self, path: str, engine: AsyncEngine, writer: Writer):
        super().__init__()
        self.path = path
        self._engine = engine
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._writer = writer
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

    # --- leases ----------------------------------------------------------------------------

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        """Grant the run's lease to ``owner`` (the contract is ``Store.acquire``'s), or raise
        ``RunBusy`` naming the holder."""
        check_run_id(run_id)
        op = LeaseOp("acquire", run_id, take_over, L.owner_text(owner), owner.host, ttl_ms(ttl))
        granted, row = await self._submit(op)
        lease = None if row is None else L.lease_of(run_id, row, owner if granted else None)
        if lease is None:  # pragma: no cover - the upsert either wins or meets a row
            raise StorageError(f"journal {self.path}: the lease of run {run_id!r} vanished")
        if not granted:
            raise busy(lease)
        return lease

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` seconds from now; ``LeaseLost`` if its epoch moved on."""
        op = LeaseOp("renew", lease.run_id, lease.epoch, ttl_ms=ttl_ms(ttl))
        row = await self._submit(op)
        renewed = None if row is None else L.lease_of(lease.run_id, row, lease.owner)
        if renewed is None:
            current = await self.lease(lease.run_id)
            raise lost(lease, None if current is None else current.epoch)
        return renewed

    async def release(self, lease: Lease) -> bool:
        """Mark ``lease`` released; False (changing nothing) if its epoch moved on."""
        return bool(await self._submit(LeaseOp("release", lease.run_id, lease.epoch)))

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

    # --- queues (store.queues) -------------------------------------------------------------

    async def _queue_read(self, sql: str, params: dict[str, Any]) -> list[Any]:
        async def go(conn: AsyncConnection) -> list[Any]:
            return await Q.read(conn, sql, params)

        return await self._run(go)

    def _owner_text(self, owner: Owner) -> str:
        return L.owner_text(owner)

    def _claimed(self, run_id: str, payload: Any, owner: Owner | None) -> Lease:
        lease = L.lease_of(run_id, payload, owner)
        if lease is None:  # pragma: no cover - the upsert either wins or meets a row
            raise StorageError(f"journal {self.path}: the lease of run {run_id!r} vanished")
        return lease

    async def _queue_clock(self) -> tuple[int, str]:
        return await self.clock_ms(), Q.CLOCK_NAME

    async def slot_clock_ms(self) -> int:
        """The journal's clock, the server's: wall-clock ms already."""
        return await self.clock_ms()

    async def claimable(
        self, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        """Runs a worker may drive (``Store.claimable``): orphans first, then runs nobody holds,
        then the live leases of this host; least recently updated first within each."""
        if limit < 1:
            raise ConfigError("limit must be at least 1")

        async def go(conn: AsyncConnection) -> list[Any]:
            values = {"limit": limit, "host": host, "agent": agent}
            return list(await conn.execute(L.CLAIMABLE, values))

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

    async def _fetch_record(self, run_id: str, key: str) -> Row | None:
        rows = await self._fetch(_GET, {"run_id": run_id, "key": key})
        return tuple(rows[0]) if rows else None

    async def _fetch_records(self, run_id: str, after: int, prefix: str | None) -> list[Record]:
        if prefix is None:
            rows = await self._fetch(_LOAD, {"run_id": run_id, "after": after})
        else:
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

    async def _fetch_runs(
        self, status: str | None, prefix: str | None, limit: int, before: tuple[int, str] | None
    ) -> list[RunRow]:
        query = _RUNS
        if status is not None:
            query = query.where(_u.c.status == status)
        if prefix is not None:
            query = query.where(_u.c.run_id.like(like_prefix(prefix), escape="/"))
        if before is not None:
            cursor = sa.tuple_(*(sa.literal(v) for v in before))
            query = query.where(sa.tuple_(_u.c.created_ms, _u.c.run_id) < cursor)
        query = query.order_by(_u.c.created_ms.desc(), _u.c.run_id.desc()).limit(limit)
        return [_run_row(row) for row in await self._fetch(query, {})]

    async def _fetch_run(self, run_id: str) -> RunRow | None:
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
