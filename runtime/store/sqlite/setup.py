"""SQLite connections for the journal: their one setup, the read connections, and the checks
every reader and writer shares (a run's format, what a database error means).

Every connection (the writer's, the readers', the migrator's) is set up by ``configure``: WAL,
``synchronous=FULL`` (an attempt marker lost to a power cut would allow a double fire), a busy
timeout and foreign keys.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from runtime.errors import StorageError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Readers",
    "configure",
    "file_identity",
    "storage_error",
]

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
            raise storage_error(self.path, exc) from exc

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


def file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def storage_error(path: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    locked = "locked" in text or "busy" in text
    if locked:
        text = f"database is locked (busy timeout exceeded): {text}"
    error = StorageError(f"journal {path}: {text}", transient=locked)
    error.__cause__ = exc
    return error
