"""The nemesis suite's external ledger: the crash suite's ledger, plus a provider that commits a
request some seconds after it arrived, and a log of what every reconciler judged.

A charge is a *request* here (the tool's process writes it); the provider, a thread of the
harness that outlives every worker, commits it as an execution ``delay`` seconds after it first
saw it, whatever became of the process that sent it. The tool waits for its request's execution
and returns it, so a tool whose timeout is shorter than the delay times out while the charge
still lands later, as a slow payment provider does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.crash.ledger import Ledger, now_ms

__all__ = ["Book", "Provider"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL, key TEXT NOT NULL,
    n INTEGER NOT NULL, pid INTEGER NOT NULL, due_ms INTEGER, execution INTEGER);
CREATE TABLE IF NOT EXISTS judged (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    said TEXT NOT NULL, stage TEXT NOT NULL, pid INTEGER NOT NULL, ms INTEGER NOT NULL);
"""


class Book(Ledger):
    """The ledger file with the provider's queue and the reconcilers' judgments."""

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__(path)
        with self._db() as db:
            db.executescript(SCHEMA)

    # --- the tool's side ------------------------------------------------------------------

    def request(self, run_id: str, call_id: str, key: str, n: int) -> int:
        """A charge request reached the provider; its id (the provider commits it later)."""
        with self._db() as db:
            cursor = db.execute(
                "INSERT INTO requests (run_id, call_id, key, n, pid) VALUES (?, ?, ?, ?, ?)",
                (run_id, call_id, key, n, os.getpid()),
            )
            return int(cursor.lastrowid or 0)

    def answer(self, request: int) -> int | None:
        """The execution that committed this request, once the provider committed it."""
        with self._db() as db:
            row = db.execute("SELECT execution FROM requests WHERE id = ?", (request,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def judge(self, run_id: str, call_id: str, attempt: int, said: str, stage: str) -> None:
        """A reconciler looked at this attempt (``looked``) or answered about it (``answered``)."""
        with self._db() as db:
            db.execute(
                "INSERT INTO judged (run_id, call_id, attempt, said, stage, pid, ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, call_id, attempt, said, stage, os.getpid(), now_ms()),
            )

    # --- the harness's side ---------------------------------------------------------------

    def judgments(self, run_id: str) -> list[tuple[str, int, str, str, int]]:
        """(call, attempt, said, stage, pid) of every reconciler judgment about the run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT call_id, attempt, said, stage, pid FROM judged WHERE run_id = ? "
                "ORDER BY id",
                (run_id,),
            ).fetchall()
        return [(str(c), int(a), str(s), str(st), int(p)) for c, a, s, st, p in rows]

    def requests(self, run_id: str) -> list[tuple[str, int, int | None]]:
        """(call, pid, execution) of every charge request of the run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT call_id, pid, execution FROM requests WHERE run_id = ? ORDER BY id",
                (run_id,),
            ).fetchall()
        return [(str(c), int(p), None if e is None else int(e)) for c, p, e in rows]

    def pending(self) -> int:
        with self._db() as db:
            (count,) = db.execute(
                "SELECT count(*) FROM requests WHERE execution IS NULL"
            ).fetchone()
        return int(count)

    def commit_due(self, delay_ms: int) -> None:
        """One pass of the provider: stamp new requests, commit those whose time came."""
        now = now_ms()
        with self._db() as db:
            db.execute("UPDATE requests SET due_ms = ? WHERE due_ms IS NULL", (now + delay_ms,))
            due: list[Any] = db.execute(
                "SELECT id, run_id, call_id, key, n FROM requests "
                "WHERE execution IS NULL AND due_ms <= ? ORDER BY id",
                (now,),
            ).fetchall()
        for request, run_id, call_id, key, n in due:
            value = self.execute(
                run_id=run_id,
                call_id=call_id,
                tool="charge",
                safety="side_effect",
                key=key,
                started_ms=now,
                n=n,
            )
            with self._db() as db:
                db.execute(
                    "UPDATE requests SET execution = ? WHERE id = ?", (value["execution"], request)
                )


class Provider:
    """The payment provider: a thread committing requests ``delay`` seconds after it saw them."""

    def __init__(self, book: Book, delay: Callable[[], float]):
        self.book = book
        self.delay = delay
        """Read on every pass: a schedule may change it as it goes."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="nemesis-provider", daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> Provider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                self.book.commit_due(int(self.delay() * 1000))
                time.sleep(0.02)
        except BaseException as exc:  # reported by the harness, never swallowed
            self.error = exc

    def drain(self, timeout: float) -> bool:
        """Wait until every request was committed (True) or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while self.book.pending() and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self.book.pending()
