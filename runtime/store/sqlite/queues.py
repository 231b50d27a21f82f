"""Queue and schedule ops on SQLite (``store.queues``), inside the writer's open transaction:
the steps written once there, run on this connection, leases judged by ``leases.judge``."""

from __future__ import annotations

import sqlite3
from typing import Any

from runtime.store.leases import judge
from runtime.store.ops import LeaseOp
from runtime.store.queues import QueueOp, clock_name, run_steps, steps
from runtime.store.sqlite.leases import read_leases, write_leases

__all__ = ["apply_queue_ops"]


def apply_queue_ops(
    conn: sqlite3.Connection, ops: list[QueueOp], clock: int, wall: int, limit: int
) -> list[Any]:
    """One outcome per op (``QueueOp``), in order, all in the open transaction."""

    def execute(sql: str, params: dict[str, Any]) -> list[Any]:
        cursor = conn.execute(sql, params)
        if cursor.description is None:
            return [()] * max(cursor.rowcount, 0)
        return cursor.fetchall()

    def acquire(run_id: str, args: dict[str, Any]) -> tuple[bool, Any]:
        leases = read_leases(conn, [run_id], limit)
        dirty: set[str] = set()
        op = LeaseOp(
            "acquire", run_id, args["take_over"], args["owner"], args["host"], args["ttl_ms"]
        )
        granted, row, _now = judge(op, leases, dirty, clock)
        if dirty:
            write_leases(conn, leases, dirty)
        return granted, (row, clock)

    name = clock_name()
    return [run_steps(steps(op, clock, name, wall), execute, acquire) for op in ops]
