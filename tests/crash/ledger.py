"""The ledger: what really happened outside the journal, in its own SQLite file.

The crash suite's tools (native ones in the agent's process, MCP ones in the server's) write every
execution here, committed (WAL, ``synchronous=FULL``) before they return, so that a process killed
a moment later cannot take it back. The IDEMPOTENT tool is a provider that applies each
idempotency key once and counts every raw request. The checks read it after the processes died.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Execution", "Ledger", "now_ms"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS begun (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
    pid INTEGER NOT NULL, ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS executions (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
    safety TEXT NOT NULL, key TEXT, pid INTEGER NOT NULL, started_ms INTEGER NOT NULL,
    ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS applied (
    key TEXT PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL,
    execution INTEGER NOT NULL, ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS model_requests (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, n INTEGER NOT NULL, pid INTEGER NOT NULL,
    ms INTEGER NOT NULL, prefix TEXT);
"""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Execution:
    """One real execution of a tool call (for the IDEMPOTENT provider: one raw request)."""

    id: int
    run_id: str
    call_id: str
    tool: str
    safety: str
    key: str | None
    pid: int
    started_ms: int
    ms: int


class Ledger:
    """A ledger file; every method opens its own connection, so any process may use it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        with self._db() as db:
            db.executescript(SCHEMA)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout = 30000")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
            yield db
        finally:
            db.close()

    # --- writes (by the tools, the server and the model) -------------------------------------

    def begin(self, run_id: str, call_id: str, tool: str) -> None:
        """A request reached the tool (before any effect): lets a test kill the agent mid-call."""
        with self._db() as db:
            db.execute(
                "INSERT INTO begun (run_id, call_id, tool, pid, ms) VALUES (?, ?, ?, ?, ?)",
                (run_id, call_id, tool, os.getpid(), now_ms()),
            )

    def execute(
        self,
        *,
        run_id: str,
        call_id: str,
        tool: str,
        safety: str,
        key: str | None,
        started_ms: int,
        n: int,
    ) -> dict[str, Any]:
        """Perform the effect, committed in one transaction; return what the tool answers.

        For ``idempotent`` the provider applies the key only the first time and answers every
        request with the first application, as a payments provider answers a repeated key.
        """
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                cursor = db.execute(
                    "INSERT INTO executions (run_id, call_id, tool, safety, key, pid, started_ms, "
                    "ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, call_id, tool, safety, key, os.getpid(), started_ms, now_ms()),
                )
                execution = cursor.lastrowid
                value: dict[str, Any] = {"tool": tool, "n": n}
                if safety == "idempotent":
                    if key is None:
                        raise ValueError("an idempotent request needs an idempotency key")
                    db.execute(
                        "INSERT OR IGNORE INTO applied (key, run_id, call_id, execution, ms) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (key, run_id, call_id, execution, now_ms()),
                    )
                    (first,) = db.execute(
                        "SELECT execution FROM applied WHERE key = ?", (key,)
                    ).fetchone()
                    value["applied"] = first
                elif safety == "side_effect":
                    value["execution"] = execution
                else:
                    value["balance"] = 100 + n
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return value

    def model_request(self, run_id: str, n: int, prefix: str | None = None) -> None:
        """``prefix``: a digest of the session's earlier messages the model was shown."""
        with self._db() as db:
            db.execute(
                "INSERT INTO model_requests (run_id, n, pid, ms, prefix) VALUES (?, ?, ?, ?, ?)",
                (run_id, n, os.getpid(), now_ms(), prefix),
            )

    # --- reads (by the checks and the reconciler) ---------------------------------------------

    def executions(self, run_id: str | None = None) -> list[Execution]:
        query = "SELECT id, run_id, call_id, tool, safety, key, pid, started_ms, ms FROM executions"
        args: tuple[Any, ...] = ()
        if run_id is not None:
            query += " WHERE run_id = ?"
            args = (run_id,)
        with self._db() as db:
            rows = db.execute(query + " ORDER BY id", args).fetchall()
        return [Execution(*row) for row in rows]

    def by_key(self, key: str) -> list[Execution]:
        """Every execution that carried this idempotency key (a reconciler's lookup)."""
        query = "SELECT id, run_id, call_id, tool, safety, key, pid, started_ms, ms FROM executions"
        with self._db() as db:
            rows = db.execute(query + " WHERE key = ? ORDER BY id", (key,)).fetchall()
        return [Execution(*row) for row in rows]

    def begun_by(self, run_id: str, call_id: str) -> list[int]:
        """The pids of the processes whose tool received this call's request, in order."""
        with self._db() as db:
            rows = db.execute(
                "SELECT pid FROM begun WHERE run_id = ? AND call_id = ? ORDER BY id",
                (run_id, call_id),
            ).fetchall()
        return [int(pid) for (pid,) in rows]

    def begun_rows(self, run_id: str) -> list[tuple[str, str, int, int]]:
        """(call id, tool, pid, ms) of every request that reached a tool of the run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT call_id, tool, pid, ms FROM begun WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [(str(c), str(t), int(p), int(ms)) for c, t, p, ms in rows]

    def applied(self, run_id: str) -> list[tuple[str, str, int]]:
        """(key, call id, execution) of every key the provider applied for the run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT key, call_id, execution FROM applied WHERE run_id = ? ORDER BY execution",
                (run_id,),
            ).fetchall()
        return [(str(k), str(c), int(e)) for k, c, e in rows]

    def begun(self, run_id: str, call_id: str) -> int:
        with self._db() as db:
            (count,) = db.execute(
                "SELECT count(*) FROM begun WHERE run_id = ? AND call_id = ?", (run_id, call_id)
            ).fetchone()
        return int(count)

    def model_requests(self, run_id: str) -> list[tuple[int, int]]:
        """(turn n, ms) of every model request of the run."""
        return [(n, ms) for n, _pid, ms in self.model_request_rows(run_id)]

    def model_request_rows(self, run_id: str) -> list[tuple[int, int, int]]:
        """(turn n, pid, ms) of every model request of the run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT n, pid, ms FROM model_requests WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [(int(n), int(pid), int(ms)) for n, pid, ms in rows]

    def model_prefixes(self, run_id: str) -> list[str | None]:
        """The digest of the session history each model request of the run was shown."""
        with self._db() as db:
            rows = db.execute(
                "SELECT prefix FROM model_requests WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [row[0] for row in rows]

    def snapshot(self) -> tuple[int, int, int, int]:
        """Row counts of every table: unchanged means nothing ran."""
        with self._db() as db:
            return tuple(  # type: ignore[return-value]
                db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("begun", "executions", "applied", "model_requests")
            )
