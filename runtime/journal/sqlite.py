"""SQLite underneath the journal: connection setup, and the group-commit writer thread.

Every connection (the writer's, the readers', the migrator's) is set up by ``configure``: WAL,
``synchronous=FULL`` (an attempt marker lost to a power cut would allow a double fire), a busy
timeout and foreign keys. The writer is one thread per journal with its own standard-library
connection; it takes every pending append of every run, commits them in one immediate-mode
transaction, and only then tells each caller.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

import structlog

from runtime import faults
from runtime.errors import FormatError, StorageError
from runtime.journal import schema

__all__ = ["BUSY_TIMEOUT_MS", "AppendOp", "CreateOp", "IndexOp", "Writer", "configure"]

log = structlog.get_logger(__name__)

BUSY_TIMEOUT_MS = 10_000
MAX_BATCH = 512


def configure(dbapi_connection: Any, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """The one place SQLite connections are set up. Safe on a new, empty file."""
    cursor = dbapi_connection.cursor()
    try:
        # The busy timeout first: switching a new file to WAL takes a lock another opener may hold.
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        mode = cursor.fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise StorageError(f"SQLite refused WAL mode (got {mode!r})")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


# One statement text per operation, compiled once from the Core tables so the writer, which
# runs on the standard-library driver for speed, cannot drift from the schema.
def _sql() -> dict[str, str]:
    r, u = schema.records, schema.runs
    return {
        "insert": (
            f"INSERT INTO {r.name} (run_id, key, kind, codec, payload, created_ms) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, key) DO NOTHING"
        ),
        "select": (
            f"SELECT seq, kind, codec, payload, created_ms FROM {r.name} "
            "WHERE run_id = ? AND key = ?"
        ),
        "exists": f"SELECT 1 FROM {r.name} WHERE run_id = ? AND key = ?",
        "touch": f"UPDATE {u.name} SET updated_ms = ? WHERE run_id = ?",
        "create_run": (
            f"INSERT INTO {u.name} (run_id, format, created_ms, updated_ms, status, agent, turns) "
            "VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (run_id) DO NOTHING"
        ),
        "header": f"SELECT payload FROM {r.name} WHERE run_id = ? AND key = 'header'",
    }


SQL = _sql()
INDEX_COLUMNS = frozenset({"status", "agent", "turns", "detail"})

Row = tuple[int, str, str, str, int]
"""A record as the writer returns it: seq, kind, codec, payload text, created_ms."""


@dataclass(slots=True)
class AppendOp:
    """Insert one record unless its key exists; report the winner and whether ``watch`` exists."""

    run_id: str
    key: str
    kind: str
    codec: str
    payload: str
    unless: str | None = None
    """If a record under this key exists in the run, insert nothing (a cancel guard)."""
    watch: str | None = None
    """Report whether a record under this key exists, read inside the same transaction."""
    check_header: bool = False
    index: dict[str, Any] | None = None


@dataclass(slots=True)
class CreateOp:
    """Write a run's header record and its index row, unless the run exists."""

    run_id: str
    header: str
    agent: str | None


@dataclass(slots=True)
class IndexOp:
    """Update a run's row in the derived index (never a record)."""

    run_id: str
    fields: dict[str, Any]


Op = AppendOp | CreateOp | IndexOp


class Writer:
    """One thread that group-commits the appends of every run of a journal.

    A caller is resolved only after the commit holding its record; a batch that fails to commit
    (a lock outlasting the busy timeout, a full disk) fails every caller in it, and nothing of
    it is committed. Callers on other event loops or threads are not supported.
    """

    def __init__(self, path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = path
        self.commits = 0
        self._busy_timeout_ms = busy_timeout_ms
        self._queue: queue.SimpleQueue[tuple[Op, asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        self._closed = False
        self._writes = 0
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(target=self._run, name=f"bide-writer:{path}", daemon=True)

    async def start(self) -> None:
        self._thread.start()
        await self._ready

    def submit(self, op: Op) -> asyncio.Future[Any]:
        if self._closed:
            raise StorageError(f"journal {self.path} is closed")
        future = self._loop.create_future()
        self._queue.put((op, future))
        return future

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    # --- the writer thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            configure(conn, busy_timeout_ms=self._busy_timeout_ms)
        except (sqlite3.Error, StorageError) as exc:
            error = _storage_error(self.path, exc)
            self._loop.call_soon_threadsafe(_fail_all, [(None, self._ready)], error)
            return
        self._loop.call_soon_threadsafe(_resolve_all, [(None, self._ready)])
        try:
            self._serve(conn)
        finally:
            conn.close()

    def _serve(self, conn: sqlite3.Connection) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._commit(conn, batch)
        # Fail whatever arrived after close, so no caller waits forever.
        leftovers = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                leftovers.append(item)
        if leftovers:
            error = StorageError(f"journal {self.path} is closed")
            self._loop.call_soon_threadsafe(_fail_all, leftovers, error)

    def _commit(
        self, conn: sqlite3.Connection, batch: list[tuple[Op, asyncio.Future[Any]]]
    ) -> None:
        results: list[tuple[Any, asyncio.Future[Any]]] = []
        records = sum(isinstance(op, AppendOp | CreateOp) for op, _ in batch)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                now = time.time_ns() // 1_000_000
                for op, future in batch:
                    results.append((self._apply(conn, op, now), future))
                faults.crashpoint("write.before_commit", records)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except FormatError as exc:
            # One op named a run of an unknown format: fail it alone and retry the rest.
            self._retry_without(conn, batch, exc)
            return
        except (sqlite3.Error, StorageError) as exc:
            error = _storage_error(self.path, exc)
            log.warning("journal_commit_failed", path=self.path, error=str(error))
            self._loop.call_soon_threadsafe(_fail_all, batch, error)
            return
        self.commits += 1
        faults.crashpoint("write.after_commit", records)
        faults.crashpoint("writer.after_commit")
        self._loop.call_soon_threadsafe(_resolve_all, results)

    def _retry_without(
        self,
        conn: sqlite3.Connection,
        batch: list[tuple[Op, asyncio.Future[Any]]],
        exc: FormatError,
    ) -> None:
        bad = [(op, f) for op, f in batch if getattr(op, "run_id", None) == exc.run_id]
        rest = [(op, f) for op, f in batch if getattr(op, "run_id", None) != exc.run_id]
        self._loop.call_soon_threadsafe(_fail_all, bad, exc)
        if rest:
            self._commit(conn, rest)

    def _apply(self, conn: sqlite3.Connection, op: Op, now: int) -> Any:
        if isinstance(op, AppendOp):
            return self._append(conn, op, now)
        if isinstance(op, CreateOp):
            return self._create(conn, op, now)
        return self._index(conn, op, now)

    def _append(self, conn: sqlite3.Connection, op: AppendOp, now: int) -> Any:
        if op.check_header:
            _check_header(conn, op.run_id)
        if op.unless is not None and conn.execute(SQL["exists"], (op.run_id, op.unless)).fetchone():
            won, row = False, None
        else:
            cursor = conn.execute(
                SQL["insert"], (op.run_id, op.key, op.kind, op.codec, op.payload, now)
            )
            won = cursor.rowcount == 1
            if won:
                row = (cursor.lastrowid, op.kind, op.codec, op.payload, now)
            else:
                row = conn.execute(SQL["select"], (op.run_id, op.key)).fetchone()
            if op.index:
                self._index(conn, IndexOp(op.run_id, op.index), now)
            else:
                conn.execute(SQL["touch"], (now, op.run_id))
        watched = (
            op.watch is not None
            and conn.execute(SQL["exists"], (op.run_id, op.watch)).fetchone() is not None
        )
        return won, row, watched

    def _create(self, conn: sqlite3.Connection, op: CreateOp, now: int) -> Any:
        cursor = conn.execute(
            SQL["insert"], (op.run_id, "header", "header", "json", op.header, now)
        )
        if cursor.rowcount == 1:
            conn.execute(
                SQL["create_run"],
                (op.run_id, schema.FORMAT_VERSION, now, now, "running", op.agent),
            )
            return True
        _check_header(conn, op.run_id)
        return False

    def _index(self, conn: sqlite3.Connection, op: IndexOp, now: int) -> None:
        unknown = set(op.fields) - INDEX_COLUMNS
        if unknown:
            raise StorageError(f"unknown run index columns {sorted(unknown)}")
        columns = sorted(op.fields)
        assignments = ", ".join([*(f"{c} = ?" for c in columns), "updated_ms = ?"])
        conn.execute(
            f"UPDATE {schema.runs.name} SET {assignments} WHERE run_id = ?",
            (*(op.fields[c] for c in columns), now, op.run_id),
        )


def _check_header(conn: sqlite3.Connection, run_id: str) -> None:
    row = conn.execute(SQL["header"], (run_id,)).fetchone()
    check_format(run_id, None if row is None else row[0])


def check_format(run_id: str, header_payload: str | None) -> None:
    """Refuse a run whose header is missing or names a format this bide cannot read."""
    if header_payload is None:
        raise FormatError(f"run {run_id!r} has no header record", run_id=run_id)
    try:
        version = json.loads(header_payload).get("format")
    except (ValueError, AttributeError):
        version = None
    if version != schema.FORMAT_VERSION:
        raise FormatError(
            f"run {run_id!r} is written in journal format {version!r}; this bide reads format "
            f"{schema.FORMAT_VERSION} only (a newer bide wrote it?)",
            run_id=run_id,
        )


def _storage_error(path: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    if "locked" in text or "busy" in text:
        text = f"database is locked (busy timeout exceeded): {text}"
    error = StorageError(f"journal {path}: {text}")
    error.__cause__ = exc
    return error


def _resolve_all(results: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    for value, future in results:
        if not future.done():
            future.set_result(value)


def _fail_all(items: list[tuple[Any, asyncio.Future[Any]]], error: BaseException) -> None:
    for _, future in items:
        if not future.done():
            future.set_exception(error)
