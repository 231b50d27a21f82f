"""Queue and schedule ops on PostgreSQL (``store.queues``), inside the writer's open transaction
and under the journal's write lock: the steps written once there, run on this connection,
leases acquired by ``leases.ACQUIRE``; times on the server's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from runtime.store.postgres import leases as L
from runtime.store.queues import QueueOp, arun_steps, steps

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["CLOCK_NAME", "apply_queue_ops", "read"]

CLOCK_NAME = "server"
"""The journal's clock on PostgreSQL: the server's."""


async def apply_queue_ops(conn: AsyncConnection, ops: list[QueueOp]) -> list[Any]:
    """One outcome per op (``QueueOp``), in order, all in the open transaction (the caller holds
    the write lock)."""
    now = int((await conn.execute(L.CLOCK)).scalar_one())

    async def execute(sql: str, params: dict[str, Any]) -> list[Any]:
        return await read(conn, sql, params)

    async def acquire(run_id: str, args: dict[str, Any]) -> tuple[bool, Any]:
        values = {"run_id": run_id, **{k: args[k] for k in ("owner", "host", "ttl_ms")}}
        values["take_over"] = args["take_over"]
        granted, row = await L.apply_lease(conn, "acquire", values)
        return bool(granted), row

    return [await arun_steps(steps(op, now, CLOCK_NAME, now), execute, acquire) for op in ops]


async def read(conn: AsyncConnection, sql: str, params: dict[str, Any]) -> list[Any]:
    """``sql``'s rows, or for a write one empty tuple per row it changed."""
    result = await conn.execute(sa.text(sql), params)
    if result.returns_rows:
        return [tuple(row) for row in result]
    return [()] * max(result.rowcount, 0)
