"""``MemoryStore``: the ``Store`` protocol held in dicts, for tests and benchmarks.

It is built on the same pieces as the databases' stores: ``StoreFront`` makes its ops,
``decide`` settles each one and ``leases.judge`` its leases, and the plan is written into dicts
rather than tables. So it keeps the journal's rules by construction, not by a restatement.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from typing import Any

from runtime.ownership import Lease, boot_id
from runtime.records import Record
from runtime.store import names
from runtime.store.checks import check_query
from runtime.store.codec import decode
from runtime.store.decide import (
    READY_STATUSES,
    WAIT_STATUSES,
    WAKE_KINDS,
    LeaseRow,
    Row,
    decide,
    wanted,
)
from runtime.store.front import JudgedLeases, StoreFront
from runtime.store.leases import holds, judge, lease_of, now_ms
from runtime.store.ops import Failed, LeaseOp, Op
from runtime.store.protocol import RunRow
from runtime.store.queuefront import QueueFront
from runtime.store.queues import QueueOp, clock_name, run_steps, steps

__all__ = ["MemoryStore"]


class MemoryStore(JudgedLeases, QueueFront, StoreFront):
    """The ``Store`` protocol held in memory: ``Journal(store=MemoryStore())``.

    For tests and benchmarks that need a journal's rules (single-winner keys, guards, commit
    order, leases, the listing index) without a file: nothing survives the process. With
    ``check`` (the default) every payload goes through the journal's codec, so what SQLite would
    refuse is refused here too, and a record read back is a copy; ``check=False`` keeps the
    caller's objects (a benchmark of the loop alone).
    """

    path = ":memory:"

    def __init__(self, *, check: bool = True):
        super().__init__()
        self._check = check
        self._records: dict[str, dict[str, Row]] = {}
        self._rows: dict[str, RunRow] = {}
        self._leases: dict[str, LeaseRow] = {}
        self._waits: dict[str, tuple[int | None, str | None, int | None]] = {}
        """A run's wait columns (``names.WAKE_COLUMNS`` and ``due_ms``), kept off its RunRow."""
        self._seq = 0
        self.commits = 0
        self._queue_db: sqlite3.Connection | None = None
        """Queues and schedules (``store.queues``): their tables in a private in-memory SQLite
        database, with the runs' statuses mirrored into it, so that the same SQL decides."""

    async def close(self) -> None:
        return None

    def _encode(self, payload: Any) -> Any:
        return super()._encode(payload) if self._check else payload

    def _decode(self, codec: str, payload: Any, run_id: str, key: str, seq: int | None) -> Any:
        if not self._check and codec == "json" and key != "header":
            return payload
        return decode(codec, payload, run_id=run_id, key=key, seq=seq)

    async def _submit(self, op: Op) -> Any:
        """One op as a batch of its own, committed at once."""
        if type(op) is QueueOp:  # type: ignore[comparison-overlap]
            return self._queue_op(op)  # type: ignore[unreachable]
        keys, _ = wanted((op,))
        present = {
            (run_id, key): row
            for run_id, key in keys
            if (row := self._records.get(run_id, {}).get(key)) is not None
        }
        now = time.time_ns() // 1_000_000
        plan = decide((op,), present, self._seq, now, self._leases, judge, now_ms(), boot_id())
        inserts = plan.inserts
        for i in range(0, len(inserts), 7):
            seq, run_id, key, kind, codec, payload, ms = inserts[i : i + 7]
            self._records.setdefault(run_id, {})[key] = (seq, kind, codec, payload, ms)
            self._seq = seq
        for run_id, fields in plan.created.items():
            self._rows[run_id] = RunRow(
                run_id,
                names.FORMAT_VERSION,
                fields["status"],
                fields.get("agent"),
                fields.get("turns") or 0,
                now,
                now,
                _detail(fields.get("detail")),
            )
        for run_id, fields in plan.index.items():
            listed = self._rows.get(run_id)
            if listed is not None:
                due, clock, wake = self._waits.get(run_id, (None, None, None))
                due = fields.pop("due_ms", due)
                clock = fields.pop("due_clock", clock)
                wake = fields.pop("wake_seq", wake)
                self._waits[run_id] = (due, clock, wake)
                self._rows[run_id] = _indexed(listed, fields, now)
        if inserts or plan.created or plan.index or plan.dirty:
            self.commits += 1
        if self._queue_db is not None:
            self._mirror(plan.created, plan.index)
        outcome = plan.outcomes[0]
        if isinstance(outcome, Failed):
            raise outcome.error
        return outcome

    # --- reads -------------------------------------------------------------------------------

    async def _fetch_record(self, run_id: str, key: str) -> Row | None:
        return self._records.get(run_id, {}).get(key)

    async def _fetch_records(self, run_id: str, after: int, prefix: str | None) -> list[Record]:
        rows = sorted(self._records.get(run_id, {}).items(), key=_by_seq)
        decoded = self._decode
        return [
            Record(seq, run_id, key, kind, decoded(codec, payload, run_id, key, seq), ms, codec)
            for key, (seq, kind, codec, payload, ms) in rows
            if seq > after and (prefix is None or key.startswith(prefix))
        ]

    async def _fetch_runs(
        self, status: str | None, prefix: str | None, limit: int, before: tuple[int, str] | None
    ) -> list[RunRow]:
        rows = sorted(self._rows.values(), key=lambda r: (r.created_ms, r.run_id), reverse=True)
        found = [
            r
            for r in rows
            if (status is None or r.status == status)
            and (prefix is None or r.run_id.startswith(prefix))
            and (before is None or (r.created_ms, r.run_id) < before)
        ]
        return [dataclasses.replace(r, lease=await self.lease(r.run_id)) for r in found[:limit]]

    async def _fetch_run(self, run_id: str) -> RunRow | None:
        row = self._rows.get(run_id)
        return None if row is None else dataclasses.replace(row, lease=await self.lease(run_id))

    # --- queues (store.queues), in a private SQLite database ------------------------------

    def _queues(self) -> sqlite3.Connection:
        if self._queue_db is None:
            import sqlalchemy as sa

            from runtime.store import schema

            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            tables = (schema.queues, schema.queue_runs, schema.schedules)
            engine = sa.create_engine("sqlite://", creator=lambda: db)
            schema.metadata.create_all(engine, tables=list(tables))
            db.execute(f"CREATE TABLE {names.runs.name} (run_id TEXT PRIMARY KEY, status TEXT)")
            db.execute(f"CREATE TABLE {names.records.name} (seq INTEGER)")
            self._queue_db = db
            self._mirror({r: {"status": row.status} for r, row in self._rows.items()}, {})
        return self._queue_db

    def _mirror(self, created: dict[str, dict[str, Any]], index: dict[str, dict[str, Any]]) -> None:
        """Copy the runs' statuses and the highest seq into the queues' database."""
        db = self._queues()
        rows = [(r, f.get("status")) for part in (created, index) for r, f in part.items()]
        db.executemany(
            f"INSERT INTO {names.runs.name} VALUES (?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "status = excluded.status",
            [row for row in rows if row[1] is not None],
        )
        db.execute(f"DELETE FROM {names.records.name}")
        db.execute(f"INSERT INTO {names.records.name} VALUES (?)", (self._seq,))

    def _queue_op(self, op: QueueOp) -> Any:
        db = self._queues()
        clock = now_ms()

        def execute(sql: str, params: dict[str, Any]) -> list[Any]:
            cursor = db.execute(sql, params)
            if cursor.description is None:
                return [()] * max(cursor.rowcount, 0)
            return cursor.fetchall()

        def acquire(run_id: str, args: dict[str, Any]) -> tuple[bool, Any]:
            lease = LeaseOp(
                "acquire", run_id, args["take_over"], args["owner"], args["host"], args["ttl_ms"]
            )
            granted, row, _now = judge(lease, self._leases, set(), clock)
            return granted, (row, clock)

        db.execute("BEGIN")
        try:
            outcome = run_steps(
                steps(op, clock, clock_name(), time.time_ns() // 1_000_000), execute, acquire
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        self.commits += 1
        return outcome

    async def _queue_read(self, sql: str, params: dict[str, Any]) -> list[Any]:
        return self._queues().execute(sql, params).fetchall()

    # --- leases, decided by ``JudgedLeases`` through ``_submit`` ------------------------------

    async def lease(self, run_id: str) -> Lease | None:
        check_query(run_id=run_id)
        row = self._leases.get(run_id)
        return None if row is None else lease_of(run_id, row, now_ms())

    async def clock_ms(self) -> int:
        """The journal's clock: the SQLite store's (``leases.now_ms``)."""
        return now_ms()

    async def claimable(
        self, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        now = now_ms()

        def order(row: RunRow) -> tuple[int, int, str]:
            # Orphans first, then runs nobody holds, then live leases (as the SQLite store).
            held = self._leases.get(row.run_id)
            rank = 1 if held is None or held[5] else 2 if holds(held, now) else 0
            return (rank, row.updated_ms, row.run_id)

        unstarted: set[str] = set()
        if self._queue_db is not None:  # claimed only through their queue (store.queues)
            query = f"SELECT run_id FROM {names.queue_runs.name} WHERE started_ms IS NULL"
            unstarted = {row[0] for row in self._queue_db.execute(query)}
        found = []
        for row in sorted(self._rows.values(), key=order):
            if row.run_id in unstarted or (agent is not None and row.agent != agent):
                continue
            if row.status in WAIT_STATUSES:
                if not self._woken(row.run_id, now):
                    continue
            elif row.status not in READY_STATUSES:
                continue
            held = self._leases.get(row.run_id)
            if held is None or not holds(held, now) or (host is not None and held[2] == host):
                found.append((row.run_id, await self.lease(row.run_id)))
            if len(found) == limit:
                break
        return found

    def _woken(self, run_id: str, now: int) -> bool:
        """A waiting or halted run is due, or a record that may wake it came after it stopped
        (the rule of the SQL stores' claim, ``decide.WAIT_STATUSES``)."""
        due, clock, wake = self._waits.get(run_id, (None, None, None))
        if due is not None and (due <= now or clock != boot_id()):
            return True
        after = wake or 0
        return any(
            seq > after and kind in WAKE_KINDS
            for seq, kind, *_ in self._records.get(run_id, {}).values()
        )


def _by_seq(item: tuple[str, Row]) -> int:
    return item[1][0]


def _detail(text: Any) -> Any:
    return None if text is None else json.loads(text)


def _indexed(row: RunRow, fields: dict[str, Any], now: int) -> RunRow:
    values = dict(fields)
    if "detail" in fields:
        values["detail"] = _detail(fields["detail"])
    return dataclasses.replace(row, **values, updated_ms=now)
