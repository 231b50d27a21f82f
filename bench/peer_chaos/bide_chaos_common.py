"""What the bide adapters of the peer chaos harness share: where the journal is, the ledger
reconciler, one attempt of a bide-driven run (``drive``), the harness's reads of the journal
(a fresh connection, SQLite or PostgreSQL), and the stack dump of an attempt that stalls
(``watch``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import faulthandler
import os
import sqlite3
from typing import Any

import workload as W

from runtime import Journal, Resolution, RunResult, RunStatus
from runtime.tools import idempotency_key_for

CTX: dict[str, str] = {}
"""The schedule's work dir and run id, for the model's ``after_charge_recorded`` check."""


STACKS = "BIDE_CHAOS_STACKS"
"""Seconds after which an attempt still running writes every thread's stack to its log."""


def watch() -> None:
    """The first thing an attempt does: with ``$BIDE_CHAOS_STACKS`` set (seconds), an attempt
    still running that long writes every thread's stack to its log (its stderr, the harness's
    ``attempt<n>.log``), and again each time as long again passes, until the harness kills it
    at its own limit (60 s). A stall then says where it waits."""
    seconds = os.environ.get(STACKS)
    if not seconds:
        return
    try:
        after = float(seconds)
    except ValueError:
        after = 0.0
    if not after > 0:
        raise ValueError(f"${STACKS} must be a number of seconds above 0, not {seconds!r}")
    faulthandler.dump_traceback_later(after, repeat=True)


def pg() -> str | None:
    return os.environ.get("BIDE_CHAOS_DB") or None


def db(workdir: str) -> str:
    return pg() or os.path.join(workdir, "bide.sqlite")


async def reconcile(journal: Journal, run_id: str, ledger: str) -> list[str]:
    """For each halted charge, find its idempotency key in the ledger and say what happened."""
    said = []
    state = await journal.require(run_id)
    for halted in state.halted_calls():
        call = halted.call
        key = idempotency_key_for(run_id, call.id)
        line = W.ledger_find_key(ledger, key)
        if line is not None:
            res = Resolution.succeeded(f"charged {line['customer']} {line['amount']}")
            evidence = f"ledger line attempt={line['attempt']} carries key {key}"
        else:
            res, evidence = Resolution.not_executed(), f"no ledger line carries key {key}"
        # The verdict is on the attempt that halted (a call resolved not-executed and tried
        # again is on attempt 2 or later, and bide refuses a verdict that names no attempt).
        new = await journal.resolve(
            run_id,
            call.id,
            res,
            attempt=halted.attempt,
            by="ledger-reconciler",
            evidence=evidence,
        )
        said.append(f"{call.id}@{halted.attempt}:{res.outcome}:{'new' if new else 'noop'}")
    return said


async def drive(durable: Any, workdir: str, run_id: str, input: str) -> RunResult[Any]:
    """One attempt: start the run or resume it; while it halts, settle its halts with the
    ledger reconciler and resume it. Returns the completed result."""
    async with Journal(db(workdir)) as journal:
        state = await journal.state(run_id)
        W.trace("START_NEW" if state is None else f"RESUME status={state.status()}")
        result = await durable.run(run_id, input, journal=journal)
        rounds = 0
        while result.status == RunStatus.HALTED:
            rounds += 1
            assert rounds <= 5, result
            W.trace(f"HALTED {[h.call_id for h in result.halts]}")
            said = await reconcile(journal, run_id, os.environ["CHAOS_LEDGER"])
            W.trace(f"RECONCILED {said}")
            result = await durable.resume(run_id, journal=journal)
        assert result.status == RunStatus.COMPLETED, result
        return result


READ_TIMEOUT = 10.0
"""Seconds a read of the journal by the harness (or the model's recorded check) may take."""


def _rows(workdir: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    url = pg()
    if url is None:
        conn = sqlite3.connect(db(workdir), timeout=10)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    async def query() -> list[tuple[Any, ...]]:
        import asyncpg

        numbered = sql
        for i in range(len(args)):
            numbered = numbered.replace("?", f"${i + 1}", 1)
        conn = await asyncpg.connect(
            url.replace("postgresql+asyncpg://", "postgresql://"), timeout=READ_TIMEOUT
        )
        try:
            return [tuple(r) for r in await conn.fetch(numbered, *args, timeout=READ_TIMEOUT)]
        finally:
            await conn.close()

    # Called from inside the drive's event loop (the model function): query from another one.
    # Bounded: a pool's ``with`` would wait for the query past the timeout, and asyncpg's own
    # connect timeout is a minute.
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(asyncio.run, query()).result(timeout=READ_TIMEOUT)
    finally:
        pool.shutdown(wait=False)


def charge_recorded(workdir: str, run_id: str) -> bool:
    keys = _rows(workdir, "select key from bide_records where run_id = ?", (run_id,))
    return any(k.startswith("result/call_charge/") for (k,) in keys)


def run_status(workdir: str, run_id: str) -> str | None:
    """The status the journal's index holds for ``run_id`` (``None``: no such run)."""
    if pg() is None and not os.path.exists(db(workdir)):
        return None
    rows = _rows(workdir, "select status from bide_runs where run_id = ?", (run_id,))
    return str(rows[0][0]) if rows else None


def store_summary(workdir: str, run_id: str) -> dict[str, Any]:
    if pg() is None and not os.path.exists(db(workdir)):
        return {"db": None}
    keys = [
        k
        for (k,) in _rows(
            workdir, "select key from bide_records where run_id = ? order by seq", (run_id,)
        )
    ]
    status = _rows(workdir, "select status from bide_runs where run_id = ?", (run_id,))
    return {"status": status[0][0] if status else None, "records": keys}
