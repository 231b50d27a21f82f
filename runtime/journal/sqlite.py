"""SQLite underneath the journal: connection setup, the read connections, the group-commit writer.

Every connection (the writer's, the readers', the migrator's) is set up by ``configure``: WAL,
``synchronous=FULL`` (an attempt marker lost to a power cut would allow a double fire), a busy
timeout and foreign keys. The writer is one thread per journal with its own standard-library
connection; it takes every pending append of every run, commits them in one immediate-mode
transaction, and only then tells each caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from runtime import faults
from runtime.errors import FormatError, StorageError
from runtime.journal import schema

__all__ = [
    "BUSY_TIMEOUT_MS",
    "AppendOp",
    "CreateOp",
    "IndexOp",
    "Readers",
    "Writer",
    "configure",
]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

BUSY_TIMEOUT_MS = 10_000


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


# Statement texts, compiled from the Core tables' names so the writer, which runs on the
# standard-library driver for speed, cannot drift from the schema. A batch's rows go into a few
# multi-row statements whose row counts are powers of two (a short list is padded by repeating
# its last row, which changes nothing), so the connection's statement cache stays small.
_R, _U = schema.records.name, schema.runs.name
_RECORD_COLUMNS = ("seq", "run_id", "key", "kind", "codec", "payload", "created_ms")
INDEX_COLUMNS = ("status", "agent", "turns", "detail")
"""The run-index columns an append or ``update_index`` may set."""

UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)
"""SQLite understands ``UPDATE ... FROM`` (older versions take a slower correlated update)."""


def _rows(width: int, n: int) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return ", ".join([row] * n)


@functools.cache
def probe_sql(n: int) -> str:
    """The records under ``n`` (run_id, key) pairs, and first a row holding only max(seq)."""
    columns = ", ".join(f"r.{c}" for c in _RECORD_COLUMNS)
    # CROSS JOIN keeps the probe list as the outer loop: one unique-index search per pair.
    return (
        f"SELECT max(seq), NULL, NULL, NULL, NULL, NULL, NULL FROM {_R} UNION ALL "
        f"SELECT {columns} FROM (VALUES {_rows(2, n)}) AS p "
        f"CROSS JOIN {_R} AS r ON r.run_id = p.column1 AND r.key = p.column2"
    )


@functools.cache
def insert_records_sql(n: int) -> str:
    # DO NOTHING only ever meets padding: the probe, under the write lock, decided the winners,
    # and the writer checks that every row it meant to insert was inserted.
    return (
        f"INSERT INTO {_R} ({', '.join(_RECORD_COLUMNS)}) VALUES {_rows(7, n)} "
        "ON CONFLICT DO NOTHING"
    )


@functools.cache
def insert_runs_sql(n: int) -> str:
    return (
        f"INSERT INTO {_U} (run_id, format, created_ms, updated_ms, status, agent, turns) "
        f"VALUES {_rows(7, n)} ON CONFLICT (run_id) DO NOTHING"
    )


@functools.cache
def touch_runs_sql(n: int) -> str:
    return f"UPDATE {_U} SET updated_ms = ? WHERE run_id IN ({', '.join('?' * n)})"


@functools.cache
def update_runs_sql(n: int, update_from: bool) -> str:
    """Set the index columns whose bit is in ``m`` and ``updated_ms``, for ``n`` runs."""
    values = f"WITH v(run_id, m, {', '.join(INDEX_COLUMNS)}) AS (VALUES {_rows(6, n)}) "
    if update_from:
        sets = ", ".join(
            f"{c} = CASE WHEN v.m & {1 << i} THEN v.{c} ELSE {_U}.{c} END"
            for i, c in enumerate(INDEX_COLUMNS)
        )
        return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? FROM v WHERE {_U}.run_id = v.run_id"
    this = f"FROM v WHERE v.run_id = {_U}.run_id"
    sets = ", ".join(
        f"{c} = CASE WHEN (SELECT v.m & {1 << i} {this}) THEN (SELECT v.{c} {this}) ELSE {c} END"
        for i, c in enumerate(INDEX_COLUMNS)
    )
    return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? WHERE run_id IN (SELECT run_id FROM v)"


Row = tuple[int, str, str, str, int]
"""A record as the writer reads it: seq, kind, codec, payload text, created_ms.

An append's outcome is ``(won, watched, *row)``, or ``(False, watched, key)`` when the record
under ``key``, one of its ``unless`` keys, refused it."""


@dataclass(slots=True)
class AppendOp:
    """Insert one record unless its key exists; report the winner and whether ``watch`` exists."""

    run_id: str
    key: str
    kind: str
    codec: str
    payload: str
    unless: tuple[str, ...] | None = None
    """If a record under one of these keys exists in the run, insert nothing (a cancel or end
    guard)."""
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
    unless: str | None = None
    """If a record under this key exists in the run, change nothing (an ended run keeps the
    status its end marker gave it, whatever a slower driver concludes)."""


Op = AppendOp | CreateOp | IndexOp


class Readers:
    """Read connections of a journal, each used by one worker thread at a time.

    Reads run in ``asyncio.to_thread``: a query never blocks the event loop, and in WAL mode it
    never waits for the writer. Idle connections are kept for the next read.
    """

    def __init__(self, path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, keep: int = 4):
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._keep = keep
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(connection, *args)`` in a worker thread; SQLite errors become StorageError."""
        if self._closed:
            raise StorageError(f"journal {self.path} is closed")
        return await asyncio.to_thread(self._call, fn, *args)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            conn = self._take()
            try:
                return fn(conn, *args)
            finally:
                self._give(conn)
        except sqlite3.Error as exc:
            raise _storage_error(self.path, exc) from exc

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            configure(conn, busy_timeout_ms=self._busy_timeout_ms)
        except BaseException:
            conn.close()
            raise
        return conn

    def _give(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        conn.close()


class _Failed:
    """One op's own failure inside a batch that otherwise commits (an unknown run format)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


class Writer:
    """One thread that group-commits the appends of every run of a journal.

    A caller is resolved only after the commit holding its record; a batch that fails to commit
    (a lock outlasting the busy timeout, a full disk) fails every caller in it, and nothing of
    it is committed. Callers on other event loops or threads are not supported.

    A batch is applied with a handful of set-wise statements rather than a few per record:
    every SQLite call gives up the GIL and must win it back from a busy event loop, and the
    Python around each statement competes with that loop too.
    """

    def __init__(self, path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = path
        self.commits = 0
        self._busy_timeout_ms = busy_timeout_ms
        self._queue: queue.SimpleQueue[tuple[Op, asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        self._closed = False
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._limit = 999
        self._files: dict[str, tuple[int, int] | None] = {}
        self._stopped: StorageError | None = None
        """Why the writer thread stopped serving, once it has: every later submit gets it."""
        self._gate = threading.Lock()
        """Orders a submit against the thread stopping: nothing is queued after the last drain."""
        self._thread = threading.Thread(target=self._run, name=f"bide-writer:{path}", daemon=True)

    async def start(self) -> None:
        self._thread.start()
        await self._ready

    def submit(self, op: Op) -> asyncio.Future[Any]:
        if self._closed:
            raise StorageError(f"journal {self.path} is closed")
        future = self._loop.create_future()
        with self._gate:
            if self._stopped is not None:
                raise self._stopped
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
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
            configure(conn, busy_timeout_ms=self._busy_timeout_ms)
            self._limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            self._files = {self.path: _identity(self.path)}
        except (sqlite3.Error, StorageError) as exc:
            error = _storage_error(self.path, exc)
            self._tell(_settle, [(_Failed(error), self._ready)])
            return
        self._tell(_settle, [(None, self._ready)])
        try:
            self._serve(conn)
        except BaseException as exc:
            # A bug or a broken part must never leave a caller waiting: stop serving, fail
            # every queued and future write with the cause, and say so once.
            error = StorageError(
                f"journal {self.path}: the writer stopped after an unexpected "
                f"{type(exc).__name__}: {exc}; nothing more can be written through this Journal "
                "(reopen it)"
            )
            error.__cause__ = exc
            log.error("journal_writer_stopped", path=self.path, error=str(error))
            self._stop(error)
            if not isinstance(exc, Exception):
                raise
        finally:
            conn.close()

    def _stop(self, error: StorageError) -> None:
        with self._gate:
            self._stopped = error
            leftovers = []
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    leftovers.append(item)
        if leftovers:
            self._tell(_fail_all, leftovers, error)

    def _tell(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the callers' loop; a loop already closed has no one waiting."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, *args)

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
            replaced = self._replaced()
            if replaced is not None:
                log.error("journal_file_replaced", path=self.path, error=str(replaced))
                self._tell(_fail_all, batch, replaced)
                self._stop(replaced)
                return
            self._commit(conn, batch)
        # Fail whatever arrived after close, so no caller waits forever.
        self._stop(StorageError(f"journal {self.path} is closed"))

    def _replaced(self) -> StorageError | None:
        """Whether the journal file, or its WAL, is no longer the one this writer writes to.

        SQLite promises nothing when its files are deleted or swapped under a live connection:
        records would go to an unlinked file and a second driver could fire an effect again.
        Checked before each batch (a stat or two); the WAL is known once the first commit made it.
        """
        wal = f"{self.path}-wal"
        if wal not in self._files and self.commits:
            self._files[wal] = _identity(wal)
        for name, identity in self._files.items():
            now = _identity(name)
            if now != identity:
                what = "deleted" if now is None else "replaced"
                return StorageError(
                    f"journal {self.path}: {os.path.basename(name)} was {what} while this process "
                    "had it open; nothing more is written through this Journal (reopen it, and "
                    "check the file: records written since may be lost)"
                )
        return None

    def _commit(
        self, conn: sqlite3.Connection, batch: list[tuple[Op, asyncio.Future[Any]]]
    ) -> None:
        ops = [op for op, _ in batch]
        records = len(ops) - sum(type(op) is IndexOp for op in ops)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes = _apply(conn, ops, time.time_ns() // 1_000_000, self._limit)
                faults.crashpoint("write.before_commit", records)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, StorageError) as exc:
            error = _storage_error(self.path, exc)
            log.warning("journal_commit_failed", path=self.path, error=str(error))
            self._tell(_fail_all, batch, error)
            return
        except BaseException as exc:
            # Not a database's refusal: this batch's callers learn it now, then the thread stops.
            error = StorageError(f"journal {self.path}: nothing of this batch was committed: {exc}")
            error.__cause__ = exc
            self._tell(_fail_all, batch, error)
            raise
        self.commits += 1
        faults.crashpoint("write.after_commit", records)
        faults.crashpoint("writer.after_commit")
        self._tell(_settle, list(zip(outcomes, [f for _, f in batch], strict=True)))


MAX_BATCH = 1024
"""Ops taken into one transaction at most. Larger batches keep more objects alive at once (the
cyclic collector then promotes and rescans them) for no fewer fsyncs once a batch is this big."""

MAX_CHUNK = 256
"""Rows per multi-row statement at most (fewer if the host allows fewer parameters). A prepared
1,024-row insert holds ~1.3 MB in the statement cache; 256 rows keep the cache near 1 MB in all
for a few more statements per large batch."""

_MASK = {c: 1 << i for i, c in enumerate(INDEX_COLUMNS)}


@functools.cache
def chunk_rows(limit: int, width: int) -> int:
    """The largest power of two of rows of ``width`` values that fits ``limit`` parameters."""
    rows = 1
    while rows * 2 * width + 1 <= limit and rows < MAX_CHUNK:
        rows *= 2
    return rows


def _apply(conn: sqlite3.Connection, ops: list[Op], now: int, limit: int) -> list[Any]:
    """Apply a batch inside the open transaction, as if its ops ran one by one in order.

    One probe reads every key the batch inserts, guards on or watches, and the highest seq;
    each op's outcome is then decided here, in order, from what existed before the batch and
    what earlier ops of it inserted; the winners are inserted with the next seqs (the write lock
    is held, so nothing comes between the probe and the inserts); each touched run's index row
    is updated once. This loop runs once per record while the event loop competes for the GIL:
    it is written for speed (flat parameter lists, no per-row helpers).
    """
    wanted: dict[tuple[str, str], None] = {}
    for op in ops:
        if type(op) is AppendOp:
            run_id = op.run_id
            wanted[run_id, op.key] = None
            if op.unless is not None:
                for guard in op.unless:
                    wanted[run_id, guard] = None
            if op.watch is not None:
                wanted[run_id, op.watch] = None
            if op.check_header:
                wanted[run_id, "header"] = None
        elif type(op) is CreateOp:
            wanted[op.run_id, "header"] = None
        elif type(op) is IndexOp and op.unless is not None:
            wanted[op.run_id, op.unless] = None
    present: dict[tuple[str, str], Row] = {}
    seq = 0
    probes = [v for pair in wanted for v in pair] or ["", ""]
    for part in _padded(probes, 2, chunk_rows(limit, 2)):
        for found in conn.execute(probe_sql(len(part) // 2), part):
            if found[1] is None:
                seq = found[0] or 0
            else:
                present[found[1], found[2]] = (found[0], *found[3:])
    inserts: list[Any] = []  # flat: seven values per record
    created: list[Any] = []  # flat: seven values per run
    index: dict[str, dict[str, Any]] = {}
    outcomes: list[Any] = []
    outcome = outcomes.append
    for op in ops:
        if type(op) is AppendOp:
            run_id = op.run_id
            if op.check_header:
                header = present.get((run_id, "header"))
                try:
                    check_format(run_id, None if header is None else header[3])
                except FormatError as exc:
                    outcome(_Failed(exc))
                    continue
            if op.unless is not None:
                refused = next((g for g in op.unless if (run_id, g) in present), None)
                if refused is not None:
                    watched = op.watch is not None and (run_id, op.watch) in present
                    outcome((False, watched, refused))
                    continue
            k = (run_id, op.key)
            record = present.get(k)
            won = record is None
            if record is None:
                seq += 1
                key, kind, codec, payload = op.key, op.kind, op.codec, op.payload
                record = present[k] = (seq, kind, codec, payload, now)
                inserts += (seq, run_id, key, kind, codec, payload, now)
            fields = index.get(run_id)
            if fields is None:
                fields = index[run_id] = {}
            if op.index:
                fields.update(op.index)
            # Flat and atomic, so the collector stops tracking it at its first look.
            outcome((won, op.watch is not None and (run_id, op.watch) in present, *record))
        elif type(op) is CreateOp:
            run_id = op.run_id
            k = (run_id, "header")
            header = present.get(k)
            if header is None:
                seq += 1
                present[k] = (seq, "header", "json", op.header, now)
                inserts += (seq, run_id, "header", "header", "json", op.header, now)
                created += (run_id, schema.FORMAT_VERSION, now, now, "running", op.agent, 0)
                outcome(True)
                continue
            try:
                check_format(run_id, header[3])
            except FormatError as exc:
                outcome(_Failed(exc))
                continue
            outcome(False)
        else:
            assert isinstance(op, IndexOp)
            unknown = set(op.fields).difference(INDEX_COLUMNS)
            if unknown:
                outcome(_Failed(StorageError(f"unknown run index columns {sorted(unknown)}")))
                continue
            if op.unless is None or (op.run_id, op.unless) not in present:
                index.setdefault(op.run_id, {}).update(op.fields)
            outcome(None)
    if inserts:
        before = conn.total_changes
        for part in _padded(inserts, 7, chunk_rows(limit, 7)):
            conn.execute(insert_records_sql(len(part) // 7), part)
        if conn.total_changes - before != len(inserts) // 7:
            raise StorageError("the journal changed under the write lock; nothing was committed")
    for part in _padded(created, 7, chunk_rows(limit, 7)):
        conn.execute(insert_runs_sql(len(part) // 7), part)
    if index:
        _update_runs(conn, index, now, limit)
    return outcomes


def _update_runs(
    conn: sqlite3.Connection, index: dict[str, dict[str, Any]], now: int, limit: int
) -> None:
    """Set each touched run's changed index columns (the batch's last value) and updated_ms."""
    touched: list[Any] = []
    changed: list[Any] = []  # flat: run_id, mask of the columns set, then the four columns
    for run_id, fields in index.items():
        if not fields:
            touched.append(run_id)
            continue
        mask = 0
        for column in fields:
            mask |= _MASK[column]
        get = fields.get
        changed += (run_id, mask, get("status"), get("agent"), get("turns"), get("detail"))
    for part in _padded(touched, 1, chunk_rows(limit, 1)):
        conn.execute(touch_runs_sql(len(part)), [now, *part])
    # Without UPDATE ... FROM each row is found by a scan of the VALUES list: keep lists short.
    rows = chunk_rows(limit, 6) if UPDATE_FROM else min(chunk_rows(limit, 6), 64)
    for part in _padded(changed, 6, rows):
        part.append(now)
        conn.execute(update_runs_sql(len(part) // 6, UPDATE_FROM), part)


def _padded(values: list[Any], width: int, rows: int) -> Iterator[list[Any]]:
    """A flat list of rows of ``width`` values, as slices of at most ``rows`` rows whose row
    count is a power of two: the last slice repeats its last row to get there."""
    step = rows * width
    for i in range(0, len(values), step):
        part = values[i : i + step]
        n = len(part) // width
        size = 1
        while size < n:
            size *= 2
        part.extend(part[-width:] * (size - n))
        yield part


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


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _storage_error(path: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    locked = "locked" in text or "busy" in text
    if locked:
        text = f"database is locked (busy timeout exceeded): {text}"
    error = StorageError(f"journal {path}: {text}", transient=locked)
    error.__cause__ = exc
    return error


def _settle(outcomes: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    for value, future in outcomes:
        if future.done():
            continue
        if isinstance(value, _Failed):
            future.set_exception(value.error)
        else:
            future.set_result(value)


def _fail_all(items: list[tuple[Any, asyncio.Future[Any]]], error: BaseException) -> None:
    for _, future in items:
        if not future.done():
            future.set_exception(error)
