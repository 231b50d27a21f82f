"""The group-commit writer on PostgreSQL: one task per journal that commits every pending write of
every run in one transaction, and only then tells each caller.

While a batch is being committed the next one gathers in the queue, so concurrent appends share
transactions without waiting for a timer. Should the connection break during COMMIT, nobody is
told anything until the server has said (``txid_status``) whether the batch committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from runtime import faults
from runtime.errors import StorageError
from runtime.logs import get_logger
from runtime.outage import Outage
from runtime.store.ops import AppendOp, CreateOp, DataOp, Failed, Op
from runtime.store.postgres.batch import DriverQuery, apply, apply_all, plain
from runtime.store.postgres.connect import (
    connection_lost,
    connection_unusable,
    sqlstate,
    storage_error,
)
from runtime.store.postgres.failover import SERVER

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

__all__ = ["MAX_BATCH", "OUTCOME_WAIT", "Writer"]

log = get_logger(__name__)

MAX_BATCH = 1024
"""Ops taken into one transaction at most."""

OUTCOME_WAIT = 30.0
"""Seconds to keep asking the server whether a batch whose COMMIT lost its connection committed,
before its callers are told the outcome is unknown."""

_STATUS = sa.text("SELECT txid_status(:xid)")
_SERVER = sa.text(f"SELECT {SERVER}")

_Item = tuple[Op, "asyncio.Future[Any]"]


class Writer:
    """Group-commits the writes of a journal on one connection of its own (reconnected when the
    server drops it). A caller is resolved only after the commit holding its write. A batch the
    server refuses for what an op holds is committed again in halves, until only the op that
    caused it fails; a batch that fails otherwise (a lost connection) fails every caller in it,
    and nothing of it is committed."""

    def __init__(self, engine: AsyncEngine, where: str):
        self.where = where
        self.commits = 0
        self._engine = engine
        self._queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._conn: AsyncConnection | None = None
        self._driver: DriverQuery | None = None
        """``_conn``'s own asyncpg connection, on which a batch of plain writes is sent."""
        self._server: str | None = None
        """Which server (an incarnation of one) ``_conn`` reached: a transaction id means
        something only to the server that gave it."""
        self._outage = Outage(log, "journal_connection_lost", "journal_connection_restored")
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Connect (a server that cannot be reached is a ``StorageError`` now, not at the first
        append) and start serving."""
        self._conn = await self._connect()
        self._task = asyncio.get_running_loop().create_task(
            self._serve(), name=f"bide-writer:{self.where}"
        )

    def submit(self, op: Op) -> asyncio.Future[Any]:
        if self._closed or self._task is None or self._task.done():
            raise StorageError(f"journal {self.where} is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((op, future))
        return future

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
        await self._drop()

    async def _connect(self) -> AsyncConnection:
        for retry in (True, False):
            try:
                conn = await self._engine.connect()
                try:
                    self._server = str((await conn.execute(_SERVER)).scalar())
                    await conn.commit()
                    self._driver = DriverQuery((await conn.get_raw_connection()).driver_connection)
                except BaseException:
                    with contextlib.suppress(Exception):
                        await conn.invalidate()  # never back to the pool: it may be why
                    await conn.close()
                    raise
                return conn
            except Exception as exc:
                if retry and (connection_lost(exc) or connection_unusable(exc)):
                    # A pooled connection the server had dropped (the writer's own loss, met
                    # on the driver's connection, was never SQLAlchemy's to see): SQLAlchemy
                    # has now seen one, and replaces every connection pooled before it. (One
                    # the driver would not use was invalidated above.)
                    continue
                raise storage_error(self.where, exc, doing="cannot connect") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _drop(self) -> None:
        conn, self._conn, self._driver = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()
                await conn.close()

    async def _serve(self) -> None:
        try:
            while True:
                first = await self._queue.get()
                if first is None:
                    break
                batch = [first]
                stop = False
                while len(batch) < MAX_BATCH and not self._queue.empty():
                    item = self._queue.get_nowait()
                    if item is None:
                        stop = True
                        break
                    batch.append(item)
                try:
                    await self._commit(batch)
                except Exception as exc:
                    # A bug must never leave a caller waiting: this batch fails (nothing it
                    # wrote is reported as written), and the writer serves the next one.
                    error = StorageError(
                        f"journal {self.where}: the writer met an unexpected "
                        f"{type(exc).__name__}: {exc}"
                    )
                    error.__cause__ = exc
                    log.error("journal_writer_error", path=self.where, error=str(error))
                    _fail_all(batch, error)
                    await self._drop()
                if stop:
                    break
        finally:
            closed = StorageError(f"journal {self.where} is closed")
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if item is not None and not item[1].done():
                    item[1].set_exception(closed)

    async def _commit(self, batch: list[_Item]) -> None:
        """Commit ``batch`` and tell its callers; should the server refuse it for what one of
        its ops holds, the halves are committed apart, so that only that op's caller fails."""
        refused = await self._attempt(batch)
        if refused is None:
            return
        if len(batch) > 1 and _one_op_could_cause(refused):
            log.warning(
                "journal_batch_split", path=self.where, ops=len(batch), error=_one_line(refused)
            )
            half = len(batch) // 2
            await self._commit(batch[:half])
            await self._commit(batch[half:])
            return
        error = storage_error(self.where, refused, doing="nothing of this batch was committed")
        log.warning("journal_commit_failed", path=self.where, error=str(error))
        _fail_all(batch, error)

    async def _attempt(self, batch: list[_Item]) -> BaseException | None:
        """Commit ``batch`` once and tell its callers, or return why the server refused it
        (the connection alive, nothing of it committed) and tell nobody."""
        ops = [op for op, _ in batch]
        records = _records(ops)
        for retry in (True, False):
            xid: list[int] = []
            outcomes: list[Any] = []
            committing = False
            server = self._server
            try:
                if self._conn is None:
                    self._conn = await self._connect()
                conn, server = self._conn, self._server
                # A batch of plain writes goes on the driver's connection, past SQLAlchemy
                # (which is told nothing: its connection is idle before and after).
                driver = self._driver if plain(ops) else None
                transaction: DriverQuery | AsyncTransaction = driver or await conn.begin()
                try:
                    if driver is not None:
                        await driver.begin_locked()
                        outcomes = await apply(driver, cast("list[DataOp]", ops), xid.append)
                    else:
                        outcomes = await apply_all(conn, ops, xid.append)
                    faults.crashpoint("write.before_commit", records)
                    committing = True
                    await transaction.commit()
                except BaseException:
                    if not committing:
                        with contextlib.suppress(Exception):
                            await transaction.rollback()
                    raise
            except asyncio.CancelledError:
                said = (
                    "whether the last batch committed is unknown"
                    if committing
                    else ("nothing of the last batch was committed")
                )
                _fail_all(
                    batch, StorageError(f"journal {self.where}: the writer was cancelled; {said}")
                )
                await self._drop()
                raise
            except Exception as exc:
                lost = connection_lost(exc) or connection_unusable(exc) or _read_only(exc)
                if lost:
                    await self._drop()
                if lost and not xid and retry:
                    # The server dropped the idle connection: nothing reached a transaction.
                    log.info("journal_reconnect", path=self.where)
                    continue
                if committing and lost:
                    await self._settle_unknown(batch, outcomes, xid[0], exc, server)
                    return None
                if lost or _unreachable(exc):
                    error = storage_error(
                        self.where, exc, doing="nothing of this batch was committed"
                    )
                    self._outage.failed(path=self.where, error=str(error))
                    _fail_all(batch, error)
                    return None
                return exc
            self._outage.ended(path=self.where)
            self._committed(batch, outcomes, records)
            return None
        raise AssertionError("unreachable")  # pragma: no cover

    def _committed(self, batch: list[_Item], outcomes: list[Any], records: int) -> None:
        self.commits += 1
        faults.crashpoint("write.after_commit", records)
        faults.crashpoint("writer.after_commit")
        for (_, future), value in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(value, Failed):
                future.set_exception(value.error)
            else:
                future.set_result(value)

    async def _settle_unknown(
        self,
        batch: list[_Item],
        outcomes: list[Any],
        xid: int,
        cause: BaseException,
        server: str | None,
    ) -> None:
        """The connection broke during COMMIT: ask the server what became of the transaction,
        on a new connection, and tell the callers only that. Another server (a standby
        promoted meanwhile) cannot say: the id may be unknown to it, or given since to another
        transaction of its own, so its answer would be a guess."""
        records = _records([op for op, _ in batch])
        log.warning("journal_commit_outcome_unknown", path=self.where, xid=xid)
        status = await self._status(xid, server)
        if status == "committed":
            log.info("journal_commit_outcome_learned", path=self.where, xid=xid, committed=True)
            self._committed(batch, outcomes, records)
            return
        if status == "aborted":
            log.info("journal_commit_outcome_learned", path=self.where, xid=xid, committed=False)
            doing = "the connection broke during COMMIT, and the server aborted the batch"
        elif status == "elsewhere":
            doing = (
                "the connection broke during COMMIT and another server answers now (a "
                f"failover): whether the batch (transaction {xid}) committed is unknown; its "
                "records may or may not be there"
            )
        else:
            doing = (
                "the connection broke during COMMIT and the server could not be asked whether "
                f"the batch (transaction {xid}) committed: its records may or may not be there"
            )
        _fail_all(batch, storage_error(self.where, cause, doing=doing))

    async def _status(self, xid: int, server: str | None) -> str | None:
        """``committed``, ``aborted``, ``elsewhere`` (another server than ``server`` answers),
        or ``None`` if the server could not say in time. While the server has not yet noticed
        the broken connection, the transaction is still in progress: ask again."""
        deadline = time.monotonic() + OUTCOME_WAIT
        delay = 0.02
        unreadable = 0
        while True:
            try:
                async with self._engine.connect() as conn:
                    if str((await conn.execute(_SERVER)).scalar()) != server:
                        return "elsewhere"
                    status = (await conn.execute(_STATUS, {"xid": xid})).scalar()
                    await conn.rollback()
            except Exception as exc:
                unreadable += 1
                if unreadable == 1:  # once: the server may take a while to come back
                    log.warning(
                        "journal_commit_outcome_unreadable", path=self.where, error=str(exc)
                    )
                status = "unreachable"
            if status in ("committed", "aborted"):
                return str(status)
            if status is None or time.monotonic() + delay > deadline:
                return None  # too old to be known (never, this soon after), or out of time
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def _records(ops: list[Op]) -> int:
    """How many records a batch appends (what the crash points count)."""
    return sum(
        1 + len(op.before) if isinstance(op, AppendOp) else isinstance(op, CreateOp) for op in ops
    )


_OP_CAUSED = ("22", "23", "54")
"""SQLSTATE classes of a refusal that what one op holds can cause: a data exception (a NUL,
an encoding), an integrity violation, a program limit (a value too large)."""


def _one_op_could_cause(exc: BaseException) -> bool:
    """Whether the server's refusal of a batch may be one op's doing, not the server's state
    (a lost connection, a shutdown, a full disk fail every op alike: splitting would not help)."""
    if isinstance(exc, StorageError):
        return False
    code = sqlstate(exc)
    if code is None:
        return not isinstance(exc, sa.exc.SQLAlchemyError | OSError)  # a bug an op may trip
    return code[:2] in _OP_CAUSED


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _read_only(exc: BaseException) -> bool:
    """Whether the server refused a write as read-only (25006): the connection reached a
    primary that has since been demoted (a switchover), and is replaced for one that is not,
    as the URL's ``target_session_attrs=read-write`` asks."""
    return sqlstate(exc) == "25006"


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says that no server could be reached (nothing was sent)."""
    return isinstance(exc, StorageError) and exc.transient


def _fail_all(batch: list[_Item], error: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(error)
