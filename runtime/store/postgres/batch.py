"""One batch of journal writes on PostgreSQL, applied inside the writer's open transaction.

``apply(query, ops, on_xid)``, under the journal's write lock, reads in one statement every key
the batch names (``decide.wanted``), the leases it is fenced by, the highest ``seq``, the
server's clock and the transaction's id; lets ``decide`` settle each op as if the ops ran one by
one in order; and writes the winners and the run index in one more statement. The writer sends
a batch of plain writes on the driver's connection (``DriverQuery``) in four round trips whatever
its size: ``BEGIN_LOCKED`` (the transaction and the lock), the probe, the write, COMMIT; one
more when the batch makes a run ready without holding its lease (it ``NOTIFY``s the workers). A
batch with lease or queue ops goes through SQLAlchemy (``apply_all``), one more round trip for
the lock and one for each kind of lease op in it: acquire, renew, release.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
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
    import asyncpg
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["BEGIN_LOCKED", "DriverQuery", "Query", "apply", "apply_all", "plain"]

Query = Callable[[sa.TextClause, dict[str, Any]], Awaitable[Sequence[Sequence[Any]]]]
"""Runs one statement with its parameters inside the open transaction, and returns its rows."""

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

BEGIN_LOCKED = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
"""A transaction and the write lock in one round trip (a simple query: it has no parameters and
returns nothing the writer needs). The probe is the next statement, not this one: in READ
COMMITTED a statement's snapshot is taken when it starts, so a probe sharing the lock's
statement would not see what the previous holder of the lock committed while this one waited."""

# Under the write lock nothing else writes, so what this reads stays true until commit. The
# transaction's id rides on the clock's row: should the connection break during COMMIT,
# ``txid_status`` of that id tells whether the batch committed.
PROBE = sa.text(
    f"SELECT 0, r.run_id, r.key, r.seq, r.kind, r.codec, r.payload, r.created_ms, "
    f"CAST(NULL AS bigint) "
    f"FROM unnest(CAST(:runs AS text[]), CAST(:keys AS text[])) AS p(run_id, key) "
    f"JOIN {_R} AS r ON r.run_id = p.run_id AND r.key = p.key "
    f"UNION ALL SELECT 1, l.run_id, NULL, l.epoch, NULL, NULL, l.owner, NULL, NULL "
    f"FROM {_L} AS l WHERE l.run_id = ANY(CAST(:fenced AS text[])) "
    f"UNION ALL SELECT 2, NULL, NULL, (SELECT max(seq) FROM {_R}), NULL, NULL, NULL, {NOW_MS}, "
    f"txid_current()"
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


def plain(ops: list[Op]) -> bool:
    """Whether a batch holds only data ops (no lease op, no queue op): what the writer sends on
    the driver's connection (``DriverQuery``), the lock taken with ``BEGIN_LOCKED``."""
    return not any(isinstance(op, LeaseOp) or type(op) is QueueOp for op in cast("list[Any]", ops))


def through(conn: AsyncConnection) -> Query:
    """A ``Query`` through SQLAlchemy's connection (and its transaction)."""

    async def run(statement: sa.TextClause, params: dict[str, Any]) -> Sequence[Sequence[Any]]:
        return list(await conn.execute(statement, params))

    return run


class DriverQuery:
    """A ``Query`` on the driver's own connection (asyncpg), past SQLAlchemy's async adapter and
    its hop through a greenlet per statement: the writer's hot path. Each statement is compiled
    once to the driver's ``$n`` placeholders; asyncpg keeps it prepared on the connection."""

    def __init__(self, connection: asyncpg.Connection[Any]):
        self.connection = connection

    async def begin_locked(self) -> None:
        await self.connection.execute(BEGIN_LOCKED)

    async def commit(self) -> None:
        await self.connection.execute("COMMIT")

    async def rollback(self) -> None:
        try:
            await self.connection.execute("ROLLBACK")
        except BaseException:
            # A connection left inside a transaction would take the next batch into it: close
            # it, and the writer's next batch finds it lost and connects anew.
            self.connection.terminate()
            raise

    async def __call__(
        self, statement: sa.TextClause, params: dict[str, Any]
    ) -> Sequence[Sequence[Any]]:
        sql, names = _COMPILED.get(statement) or _compile(statement)
        rows: list[Any] = await self.connection.fetch(sql, *[params[name] for name in names])
        return rows


_COMPILED: dict[sa.TextClause, tuple[str, tuple[str, ...]]] = {}
"""Each statement ``DriverQuery`` has run: its text with ``$n`` placeholders, and the names of the
parameters in their order."""


def _compile(statement: sa.TextClause) -> tuple[str, tuple[str, ...]]:
    from sqlalchemy.dialects.postgresql.asyncpg import dialect

    compiled = statement.compile(dialect=dialect())  # type: ignore[no-untyped-call]
    names = tuple(compiled.positiontup or ())
    _COMPILED[statement] = (compiled.string, names)
    return compiled.string, names


async def apply_all(
    conn: AsyncConnection, ops: list[Op], on_xid: Callable[[int], None]
) -> list[Any]:
    """Apply a batch, lease and queue ops among its writes, through SQLAlchemy inside the open
    transaction; one outcome per op, in order.

    The queue ops are applied first (``store.queues``), then the lease ops, one statement per
    kind (``leases.apply_leases``), then the rest (``apply``). Reordering is sound: no op of a
    batch was answered before another was submitted (every caller awaits its op), so the ops of
    one batch are concurrent and any order among them is one they could have run in. It is
    still one transaction: a lease is never granted by a batch that fails.
    """
    on_xid((await conn.execute(LOCK)).one()[1])
    return await _apply_locked(conn, ops)


async def _apply_locked(conn: AsyncConnection, ops: list[Op]) -> list[Any]:
    if any(type(op) is QueueOp for op in cast("list[Any]", ops)):  # store.queues: those first
        return await with_queue_ops_async(
            cast("list[Any]", ops),
            lambda queued: apply_queue_ops(conn, queued),
            lambda rest: _apply_locked(conn, rest),
        )
    leases = [(i, op) for i, op in enumerate(ops) if isinstance(op, LeaseOp)]
    rest = [(i, op) for i, op in enumerate(ops) if not isinstance(op, LeaseOp)]
    outcomes: list[Any] = [None] * len(ops)
    if leases:
        done = await L.apply_leases(conn, [(op.action, _values(op)) for _, op in leases])
        for (i, _), outcome in zip(leases, done, strict=True):
            outcomes[i] = outcome
    if rest:
        done = await apply(through(conn), [op for _, op in rest], lambda _xid: None)
        for (i, _), outcome in zip(rest, done, strict=True):
            outcomes[i] = outcome
    return outcomes


async def apply(query: Query, ops: list[DataOp], on_xid: Callable[[int], None]) -> list[Any]:
    """Apply a batch inside the open transaction, whose caller holds the write lock; one
    outcome per op, in order (``decide``).

    ``on_xid`` learns the transaction's id as soon as it is known.
    """
    keys, fenced = wanted(ops)
    present: dict[tuple[str, str], Row] = {}
    leases: dict[str, LeaseRow] = {}
    seq = now = 0
    probe = {"runs": [r for r, _ in keys], "keys": [k for _, k in keys], "fenced": list(fenced)}
    for what, run_id, key, number, kind, codec, payload, ms, xid in await query(PROBE, probe):
        if what == 0:
            present[run_id, key] = (number, kind, codec, payload, ms)
        elif what == 1:
            # The lease as the fencing check reads it: its epoch and its owner (to name it).
            leases[run_id] = (number, payload, "", 0, 0, False)
        else:
            seq, now = number or 0, ms
            on_xid(xid)
    plan = decide(ops, present, seq, now, leases)
    if plan.inserts or plan.created or plan.index:
        await _write(query, plan.inserts, plan.created, plan.index, now)
    if plan.releases:
        values = {"runs": list(plan.releases), "epochs": list(plan.releases.values())}
        await query(L.RELEASE_MANY, values)
    if plan.ready:
        await query(NOTIFY, {"runs": list(plan.ready)})
    return plan.outcomes


async def _write(
    query: Query,
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
    (counts,) = await query(WRITE, values)
    if counts[0] != len(inserts) // 7:
        raise StorageError("the journal changed under the write lock; nothing was committed")
