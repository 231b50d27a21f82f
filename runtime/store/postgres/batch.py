"""One batch of journal writes on PostgreSQL, applied inside the writer's open transaction.

``apply(conn, ops)`` takes the journal's write lock, reads in one statement every key the batch
names (``decide.wanted``), the leases it is fenced by, the highest ``seq`` and the server's
clock; lets ``decide`` settle each op as if the ops ran one by one in order; and writes the
winners and the run index in one more statement. Four round trips per batch, whatever its size (five
when the batch makes a run ready without holding its lease: it ``NOTIFY``s the workers), plus
one for each kind of lease op in it: acquire, renew, release (``apply_all``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from runtime.errors import StorageError
from runtime.store import names, schema
from runtime.store.decide import LeaseRow, Row, decide, wanted
from runtime.store.ops import DataOp, LeaseOp, Op
from runtime.store.postgres import leases as L
from runtime.store.postgres.connect import NOW_MS, READY_CHANNEL, RECORDS_CHANNEL, WRITE_LOCK
from runtime.store.postgres.queues import apply_queue_ops
from runtime.store.queues import QueueOp, with_queue_ops_async

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["apply", "apply_all"]

_R, _U, _L = schema.records.name, schema.runs.name, schema.leases.name
INDEX_COLUMNS = schema.INDEX_COLUMNS + names.WAKE_COLUMNS
"""The index columns a batch sets: those its callers name, and those of a wait (``decide``)."""
_MASK = {c: 1 << i for i, c in enumerate(INDEX_COLUMNS)}
_TYPES = {
    "status": "text",
    "agent": "text",
    "turns": "integer",
    "detail": "text",
    "due_ms": "bigint",
    "due_clock": "text",
    "wake_seq": "bigint",
}
_NEW = ", ".join(f"CAST(:n_{c} AS {_TYPES[c]}[])" for c in INDEX_COLUMNS)
_UPDATED = ", ".join(f"CAST(:u_{c} AS {_TYPES[c]}[])" for c in INDEX_COLUMNS)
_COLUMNS = ", ".join(INDEX_COLUMNS)

LOCK = sa.text(f"SELECT pg_advisory_xact_lock({WRITE_LOCK}), txid_current()")
"""The write lock, and the transaction's id: should the connection break during COMMIT,
``txid_status`` of that id tells whether the batch committed."""

# Under the write lock nothing else writes, so what this reads stays true until commit.
PROBE = sa.text(
    f"SELECT 0, r.run_id, r.key, r.seq, r.kind, r.codec, r.payload, r.created_ms "
    f"FROM unnest(CAST(:runs AS text[]), CAST(:keys AS text[])) AS p(run_id, key) "
    f"JOIN {_R} AS r ON r.run_id = p.run_id AND r.key = p.key "
    f"UNION ALL SELECT 1, l.run_id, NULL, l.epoch, NULL, NULL, l.owner, NULL FROM {_L} AS l "
    f"WHERE l.run_id = ANY(CAST(:fenced AS text[])) "
    f"UNION ALL SELECT 2, NULL, NULL, (SELECT max(seq) FROM {_R}), NULL, NULL, NULL, {NOW_MS}"
)

NOTIFY = sa.text(
    f"SELECT count(pg_notify('{READY_CHANNEL}', r)) FROM unnest(CAST(:runs AS text[])) AS r"
)
"""Tell the workers that these runs are ready; delivered when (and only if) the batch commits."""

# Rows inserted by one CTE are invisible to its siblings: a run created in this batch gets its
# final index values in its INSERT, and only runs that existed before are UPDATEd.
_SETS = ", ".join(
    f"{c} = CASE WHEN v.m & {bit} <> 0 THEN v.{c} ELSE u.{c} END" for c, bit in _MASK.items()
)
WRITE = sa.text(
    f"WITH ins AS (INSERT INTO {_R} (seq, run_id, key, kind, codec, payload, created_ms) "
    f"SELECT * FROM unnest(CAST(:seqs AS bigint[]), CAST(:r_runs AS text[]), "
    f"CAST(:r_keys AS text[]), CAST(:r_kinds AS text[]), CAST(:r_codecs AS text[]), "
    f"CAST(:r_payloads AS text[]), CAST(:r_ms AS bigint[])) RETURNING 1), "
    f"created AS (INSERT INTO {_U} (run_id, format, created_ms, updated_ms, {_COLUMNS}) "
    f"SELECT n.run_id, {schema.FORMAT_VERSION}, :now, :now, "
    f"{', '.join(f'n.{c}' for c in INDEX_COLUMNS)} "
    f"FROM unnest(CAST(:n_runs AS text[]), {_NEW}) "
    f"AS n(run_id, {_COLUMNS}) ON CONFLICT (run_id) DO NOTHING RETURNING 1), "
    f"updated AS (UPDATE {_U} AS u SET {_SETS}, updated_ms = :now "
    f"FROM unnest(CAST(:u_runs AS text[]), CAST(:u_masks AS integer[]), {_UPDATED}) "
    f"AS v(run_id, m, {_COLUMNS}) "
    f"WHERE u.run_id = v.run_id RETURNING 1) "
    f"SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM created), "
    f"(SELECT count(*) FROM updated), (SELECT count(pg_notify('{RECORDS_CHANNEL}', w.r)) "
    f"FROM (SELECT DISTINCT unnest(CAST(:r_runs AS text[]))) AS w(r))"
)
"""The batch's writes, and a notification per run it inserted records of (to its followers),
delivered when (and only if) the batch commits: no round trip of its own."""


def _values(op: LeaseOp) -> dict[str, Any]:
    """A lease op's parameters, as ``leases.apply_lease`` binds them."""
    if op.action == "acquire":
        return {
            "run_id": op.run_id,
            "owner": op.owner,
            "host": op.host,
            "ttl_ms": op.ttl_ms,
            "take_over": op.epoch,
        }
    if op.action == "renew":
        return {"run_id": op.run_id, "epoch": op.epoch, "ttl_ms": op.ttl_ms}
    return {"run_id": op.run_id, "epoch": op.epoch}


def _encode_index(fields: dict[str, Any]) -> tuple[Any, ...]:
    mask = 0
    for column in fields:
        mask |= _MASK[column]
    get = fields.get
    return (mask, *[get(c) for c in INDEX_COLUMNS])


async def apply_all(
    conn: AsyncConnection, ops: list[Op], on_xid: Callable[[int], None]
) -> list[Any]:
    """Apply a batch, lease ops among its writes, inside the open transaction; one outcome per
    op, in order.

    The lease ops are applied first, one statement per kind (``leases.apply_leases``), then the
    rest (``apply``). Reordering
    is sound: no op of a batch was answered before another was submitted (every caller awaits
    its op), so the ops of one batch are concurrent and any order among them is one they could
    have run in. It is still one transaction: a lease is never granted by a batch that fails.
    """
    if any(type(op) is QueueOp for op in cast("list[Any]", ops)):  # store.queues: those first
        on_xid((await conn.execute(LOCK)).one()[1])
        return await with_queue_ops_async(
            cast("list[Any]", ops),
            lambda queued: apply_queue_ops(conn, queued),
            lambda rest: apply_all(conn, rest, lambda _xid: None),
        )
    leases = [(i, op) for i, op in enumerate(ops) if isinstance(op, LeaseOp)]
    rest = [(i, op) for i, op in enumerate(ops) if not isinstance(op, LeaseOp)]
    if not leases:
        return await apply(conn, [op for _, op in rest], on_xid)
    on_xid((await conn.execute(LOCK)).one()[1])
    outcomes: list[Any] = [None] * len(ops)
    done = await L.apply_leases(conn, [(op.action, _values(op)) for _, op in leases])
    for (i, _), outcome in zip(leases, done, strict=True):
        outcomes[i] = outcome
    if rest:
        done = await apply(conn, [op for _, op in rest], lambda _xid: None)
        for (i, _), outcome in zip(rest, done, strict=True):
            outcomes[i] = outcome
    return outcomes


async def apply(
    conn: AsyncConnection, ops: list[DataOp], on_xid: Callable[[int], None]
) -> list[Any]:
    """Apply a batch inside the open transaction; one outcome per op, in order (``decide``).

    ``on_xid`` learns the transaction's id as soon as it is known.
    """
    keys, fenced = wanted(ops)
    on_xid((await conn.execute(LOCK)).one()[1])
    present: dict[tuple[str, str], Row] = {}
    leases: dict[str, LeaseRow] = {}
    seq = now = 0
    probe = {"runs": [r for r, _ in keys], "keys": [k for _, k in keys], "fenced": list(fenced)}
    for what, run_id, key, number, kind, codec, payload, ms in await conn.execute(PROBE, probe):
        if what == 0:
            present[run_id, key] = (number, kind, codec, payload, ms)
        elif what == 1:
            # The lease as the fencing check reads it: its epoch and its owner (to name it).
            leases[run_id] = (number, payload, "", 0, 0, False)
        else:
            seq, now = number or 0, ms
    plan = decide(ops, present, seq, now, leases)
    if plan.inserts or plan.created or plan.index:
        await _write(conn, plan.inserts, plan.created, plan.index, now)
    if plan.releases:
        values = {"runs": list(plan.releases), "epochs": list(plan.releases.values())}
        await conn.execute(L.RELEASE_MANY, values)
    if plan.ready:
        await conn.execute(NOTIFY, {"runs": list(plan.ready)})
    return plan.outcomes


async def _write(
    conn: AsyncConnection,
    inserts: list[Any],
    created: dict[str, dict[str, Any]],
    index: dict[str, dict[str, Any]],
    now: int,
) -> None:
    r = [inserts[i::7] for i in range(7)]  # seven values per record, flat
    masks = {run_id: _encode_index(fields) for run_id, fields in index.items()}
    values: dict[str, Any] = {
        "now": now,
        "seqs": list(r[0]),
        "r_runs": list(r[1]),
        "r_keys": list(r[2]),
        "r_kinds": list(r[3]),
        "r_codecs": list(r[4]),
        "r_payloads": list(r[5]),
        "r_ms": list(r[6]),
        "n_runs": list(created),
        "u_runs": list(masks),
        "u_masks": [m[0] for m in masks.values()],
    }
    for i, column in enumerate(INDEX_COLUMNS, 1):
        values[f"n_{column}"] = [f.get(column) for f in created.values()]
        values[f"u_{column}"] = [m[i] for m in masks.values()]
    values["n_turns"] = [t or 0 for t in values["n_turns"]]
    counts = (await conn.execute(WRITE, values)).one()
    if counts[0] != len(inserts) // 7:
        raise StorageError("the journal changed under the write lock; nothing was committed")
