"""Deliberately broken runtimes, made in the child process before the CLI runs: each must be caught.

``apply(name)`` patches bide at a public seam (``SQLiteStore.append``, ``SQLiteStore.load``, the
``idempotency_key_for`` as the drive looks it up, the writer's database driver, the store's lease
methods) and never edits a file. A seam that is gone makes the child print
``MUTANT-SEAM-MISSING`` and exit 70, which fails the suite loudly instead of letting the mutant
pass for the sound runtime.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import uuid
from typing import Any

from runtime import records as R
from runtime.errors import RunBusy
from runtime.ownership import Lease
from runtime.records import Appended, Record
from runtime.store.sqlite import writer as journal_writer
from runtime.store.sqlite.store import SQLiteStore
from tests.crash.ledger import now_ms

__all__ = ["MUTANTS", "apply", "apply_from_env"]

MUTANTS: dict[str, str] = {
    "skip_marker": "(a) the attempt marker is skipped",
    "ignore_results": "(b) resume ignores recorded results",
    "marker_never_started": "(c) a marker without a result is treated as never started",
    "rederived_keys": "(d) idempotency keys are re-derived on every attempt",
    "ack_before_commit": "(e) the writer tells its callers before it commits",
    "skip_lease_check": "(f) the lease check is skipped: a held run is granted, appends unfenced",
}

_fake_seq = itertools.count(1)


def _missing(seam: str) -> None:
    print(f"MUTANT-SEAM-MISSING: {seam}", file=sys.stderr)
    raise SystemExit(70)


def _skip_marker() -> None:
    real = SQLiteStore.append

    async def append(
        self: SQLiteStore, run_id: str, key: str, kind: str, payload: Any, **kw: Any
    ) -> Any:
        if kind == R.ATTEMPT:  # pretend it was written and won
            # What the drive wrote ahead of the marker (its turn) still commits.
            ahead = list(kw.pop("before", ()))
            committed: tuple[Record, ...] = ()
            if ahead:
                last = ahead.pop()
                done = await real(
                    self, run_id, last.key, last.kind, last.payload, before=ahead, **kw
                )
                assert done.record is not None, "a mutant that skips markers met a guard"
                committed = (*done.before, done.record)
            record = Record(-next(_fake_seq), run_id, key, kind, payload, now_ms())
            return Appended(True, record, False, before=committed)
        return await real(self, run_id, key, kind, payload, **kw)

    SQLiteStore.append = append  # type: ignore[method-assign]


def _ignore_results() -> None:
    real = SQLiteStore.load

    async def load(self: SQLiteStore, run_id: str, **kw: Any) -> list[Record]:
        return [r for r in await real(self, run_id, **kw) if r.kind not in (R.RESULT, R.LATE)]

    SQLiteStore.load = load  # type: ignore[method-assign]


def _marker_never_started() -> None:
    real = SQLiteStore.load

    async def load(self: SQLiteStore, run_id: str, **kw: Any) -> list[Record]:
        records = await real(self, run_id, **kw)
        done = {(r.payload["call_id"], r.payload["attempt"]) for r in records if r.kind == R.RESULT}
        forged = []
        for r in records:
            call_id, attempt = r.payload.get("call_id"), r.payload.get("attempt")
            if r.kind == R.ATTEMPT and (call_id, attempt) not in done:
                payload = {"call_id": call_id, "attempt": attempt, "outcome": "not_executed"}
                key = R.result_key(call_id, attempt)
                forged.append(Record(-next(_fake_seq), run_id, key, R.RESULT, payload, now_ms()))
        return records + forged

    SQLiteStore.load = load  # type: ignore[method-assign]


def _rederived_keys() -> None:
    import runtime.calls
    import runtime.tools

    if not hasattr(runtime.calls, "idempotency_key_for"):
        _missing("runtime.calls.idempotency_key_for (the name a call derives its key with)")
    real = runtime.tools.idempotency_key_for

    def rederived(run_id: str, call_id: str, **options: Any) -> str:
        return real(run_id, f"{call_id}/{uuid.uuid4().hex}", **options)

    runtime.calls.idempotency_key_for = rederived  # type: ignore[attr-defined]
    runtime.tools.idempotency_key_for = rederived


class _OwedCommit:
    """The writer's connection, except that COMMIT returns at once and really happens at the next
    BEGIN or at close: callers are told before their records are durable."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self._owed = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            self._owed = True
            return None
        if self._owed and sql.startswith("BEGIN"):
            self._conn.execute("COMMIT")
            self._owed = False
        return self._conn.execute(sql, *args)

    def close(self) -> None:
        if self._owed:
            self._conn.execute("COMMIT")
        self._conn.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _Driver:
    """Stands in for the ``sqlite3`` module the writer connects with."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sqlite3, name)

    def connect(self, *args: Any, **kwargs: Any) -> _OwedCommit:
        return _OwedCommit(sqlite3.connect(*args, **kwargs))


def _ack_before_commit() -> None:
    if getattr(journal_writer, "sqlite3", None) is not sqlite3:
        _missing("runtime.store.sqlite.writer.sqlite3 (the driver the group-commit writer uses)")
    journal_writer.sqlite3 = _Driver()  # type: ignore[assignment]


def _skip_lease_check() -> None:
    """Every drive gets the lease, whoever holds it (as if its holder were gone: the epoch is
    bumped), a worker is shown every unfinished run as free, a renewal never learns of a
    takeover, and the store takes every append whatever epoch it carries."""
    real_acquire = SQLiteStore.acquire
    real_append = SQLiteStore.append
    real_update_index = SQLiteStore.update_index
    real_create_run = SQLiteStore.create_run

    async def acquire(
        self: SQLiteStore, run_id: str, owner: Any, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        try:
            return await real_acquire(self, run_id, owner, ttl=ttl, take_over=take_over)
        except RunBusy as held:
            return await real_acquire(self, run_id, owner, ttl=ttl, take_over=held.lease.epoch)

    async def renew(self: SQLiteStore, lease: Lease, *, ttl: float) -> Lease:
        return lease

    async def claimable(
        self: SQLiteStore, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        found: list[tuple[str, Lease | None]] = []
        for status in ("submitted", "running"):
            runs = (await self.list_runs(status=status)).runs
            found += [(r.run_id, None) for r in runs if agent is None or r.agent == agent]
        return found[:limit]

    async def append(self: SQLiteStore, *args: Any, epoch: int | None = None, **kw: Any) -> Any:
        kw.pop("release", None)  # no epoch to release by: the drive releases it afterwards
        return await real_append(self, *args, **kw)

    async def update_index(
        self: SQLiteStore, run_id: str, *, epoch: int | None = None, **kw: Any
    ) -> None:
        await real_update_index(self, run_id, **kw)

    async def create_run(self: SQLiteStore, run_id: str, **kw: Any) -> bool:
        kw.pop("epoch", None)
        return await real_create_run(self, run_id, **kw)

    for seam in ("acquire", "renew", "claimable", "append", "update_index", "create_run"):
        if not hasattr(SQLiteStore, seam):
            _missing(f"SQLiteStore.{seam} (a lease seam)")
    SQLiteStore.acquire = acquire  # type: ignore[method-assign]
    SQLiteStore.renew = renew  # type: ignore[method-assign]
    SQLiteStore.claimable = claimable  # type: ignore[method-assign]
    SQLiteStore.append = append  # type: ignore[method-assign]
    SQLiteStore.update_index = update_index  # type: ignore[method-assign]
    SQLiteStore.create_run = create_run  # type: ignore[method-assign]


_APPLY = {
    "skip_marker": _skip_marker,
    "ignore_results": _ignore_results,
    "marker_never_started": _marker_never_started,
    "rederived_keys": _rederived_keys,
    "ack_before_commit": _ack_before_commit,
    "skip_lease_check": _skip_lease_check,
}


def apply(name: str) -> None:
    if name not in _APPLY:
        _missing(f"no mutant named {name!r}; known: {', '.join(_APPLY)}")
    _APPLY[name]()


def apply_from_env() -> None:
    name = os.environ.get("BIDE_CRASH_MUTANT")
    if name:
        apply(name)
