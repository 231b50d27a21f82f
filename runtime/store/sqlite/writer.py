"""The group-commit writer: one thread per journal that commits every pending append of every
run in one immediate-mode transaction, and only then tells each caller."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime import faults
from runtime.errors import StorageError
from runtime.logs import get_logger
from runtime.store.leases import now_ms
from runtime.store.ops import AppendOp, CreateOp, Failed, Op
from runtime.store.sqlite.batch import apply
from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, configure, file_identity, storage_error

__all__ = ["MAX_BATCH", "Writer"]

log = get_logger(__name__)


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
            self._files = {self.path: file_identity(self.path)}
        except (sqlite3.Error, StorageError) as exc:
            error = storage_error(self.path, exc)
            self._tell(_settle, [(Failed(error), self._ready)])
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
            self._files[wal] = file_identity(wal)
        for name, identity in self._files.items():
            now = file_identity(name)
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
        records = sum(
            1 + len(op.before) if type(op) is AppendOp else type(op) is CreateOp for op in ops
        )
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes = apply(conn, ops, time.time_ns() // 1_000_000, self._limit, now_ms())
                faults.crashpoint("write.before_commit", records)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, StorageError) as exc:
            error = storage_error(self.path, exc)
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


def _settle(outcomes: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    for value, future in outcomes:
        if future.done():
            continue
        if isinstance(value, Failed):
            future.set_exception(value.error)
        else:
            future.set_result(value)


def _fail_all(items: list[tuple[Any, asyncio.Future[Any]]], error: BaseException) -> None:
    for _, future in items:
        if not future.done():
            future.set_exception(error)
