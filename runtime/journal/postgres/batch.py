"""One batch of journal writes on PostgreSQL, applied inside the writer's open transaction.

``apply(conn, ops)`` takes the journal's write lock, reads in one statement every key the batch
inserts, guards on or watches, the leases it is fenced by, the highest ``seq`` and the server's
clock; decides each op's outcome as if the ops ran one by one in order; and writes the winners
and the run index in one more statement. Four round trips per batch, whatever its size (five
when the batch makes a run ready without holding its lease: it ``NOTIFY``s the workers), plus
one for each kind of lease op in it: acquire, renew, release (``apply_all``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from runtime.errors import FormatError, LeaseLost, StorageError
from runtime.journal import schema
from runtime.journal.postgres import leases as L
from runtime.journal.postgres.connect import (
    NOW_MS,
    READY_CHANNEL,
    READY_STATUSES,
    RECORDS_CHANNEL,
    WRITE_LOCK,
)
from runtime.journal.protocol import written_ahead
from runtime.journal.sqlite.setup import check_format

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "AppendOp",
    "CreateOp",
    "DataOp",
    "Failed",
    "IndexOp",
    "LeaseOp",
    "Op",
    "apply",
    "apply_all",
    "fenced",
]

_R, _U, _L = schema.records.name, schema.runs.name, schema.leases.name
INDEX_COLUMNS = schema.INDEX_COLUMNS
_MASK = {c: 1 << i for i, c in enumerate(INDEX_COLUMNS)}

LOCK = sa.text(f"SELECT pg_advisory_xact_lock({WRITE_LOCK}), txid_current()")
"""The write lock, and the transaction's id: should the connection break during COMMIT,
``txid_status`` of that id tells whether the batch committed."""

# Under the write lock nothing else writes, so what this reads stays true until commit.
PROBE = sa.text(
    f"SELECT 0, r.run_id, r.key, r.seq, r.kind, r.codec, r.payload, r.created_ms "
    f"FROM unnest(CAST(:runs AS text[]), CAST(:keys AS text[])) AS p(run_id, key) "
    f"JOIN {_R} AS r ON r.run_id = p.run_id AND r.key = p.key "
    f"UNION ALL SELECT 1, l.run_id, NULL, l.epoch, NULL, NULL, NULL, NULL FROM {_L} AS l "
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
    f"created AS (INSERT INTO {_U} (run_id, format, created_ms, updated_ms, status, agent, "
    f"turns, detail) SELECT n.run_id, {schema.FORMAT_VERSION}, :now, :now, n.status, n.agent, "
    f"n.turns, n.detail FROM unnest(CAST(:n_runs AS text[]), CAST(:n_status AS text[]), "
    f"CAST(:n_agents AS text[]), CAST(:n_turns AS integer[]), CAST(:n_details AS text[])) "
    f"AS n(run_id, status, agent, turns, detail) ON CONFLICT (run_id) DO NOTHING RETURNING 1), "
    f"updated AS (UPDATE {_U} AS u SET {_SETS}, updated_ms = :now "
    f"FROM unnest(CAST(:u_runs AS text[]), CAST(:u_masks AS integer[]), "
    f"CAST(:u_status AS text[]), CAST(:u_agents AS text[]), CAST(:u_turns AS integer[]), "
    f"CAST(:u_details AS text[])) AS v(run_id, m, status, agent, turns, detail) "
    f"WHERE u.run_id = v.run_id RETURNING 1) "
    f"SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM created), "
    f"(SELECT count(*) FROM updated), (SELECT count(pg_notify('{RECORDS_CHANNEL}', w.r)) "
    f"FROM (SELECT DISTINCT unnest(CAST(:r_runs AS text[]))) AS w(r))"
)
"""The batch's writes, and a notification per run it inserted records of (to its followers),
delivered when (and only if) the batch commits: no round trip of its own."""


@dataclass(slots=True)
class AppendOp:
    """Insert one record unless its key exists; report the winner and whether ``watch`` exists."""

    run_id: str
    key: str
    kind: str
    codec: str
    payload: str
    unless: tuple[str, ...] | None = None
    watch: str | None = None
    check_header: bool = False
    index: dict[str, Any] | None = None
    epoch: int | None = None
    """Refused with ``LeaseLost`` unless the run's lease has this epoch (when given)."""
    before: tuple[tuple[str, str, str], ...] = ()
    """Records (key, kind, payload text) to insert first, all of them and this one or none."""
    release: bool = False
    """Release the run's lease (of ``epoch``) in the same transaction, unless refused."""


@dataclass(slots=True)
class CreateOp:
    """Write a run's header record and its index row, unless the run exists."""

    run_id: str
    header: str
    agent: str | None
    epoch: int | None = None


@dataclass(slots=True)
class IndexOp:
    """Update a run's row in the derived index (never a record)."""

    run_id: str
    fields: dict[str, Any]
    unless: str | None = None
    epoch: int | None = None


@dataclass(slots=True)
class LeaseOp:
    """Acquire, renew or release a run's lease (``leases.apply_lease`` says what each returns)."""

    action: L.Action
    run_id: str
    values: dict[str, Any]


DataOp = AppendOp | CreateOp | IndexOp
Op = DataOp | LeaseOp


class Failed:
    """One op's own failure inside a batch that otherwise commits (an unknown format, a lost
    lease)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def fenced(run_id: str, epoch: int, current: int | None) -> LeaseLost:
    held = "it has no lease" if current is None else f"another owner holds epoch {current}"
    return LeaseLost(
        f"run {run_id!r}: this drive's lease (epoch {epoch}) was taken over ({held}); "
        "it appends nothing more and runs no further tool",
        run_id=run_id,
    )


def _encode_index(fields: dict[str, Any]) -> tuple[int, Any, Any, Any, Any]:
    mask = 0
    for column in fields:
        mask |= _MASK[column]
    get = fields.get
    return mask, get("status"), get("agent"), get("turns"), get("detail")


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
    leases = [(i, op) for i, op in enumerate(ops) if isinstance(op, LeaseOp)]
    rest = [(i, op) for i, op in enumerate(ops) if not isinstance(op, LeaseOp)]
    if not leases:
        return await apply(conn, [op for _, op in rest], on_xid)
    on_xid((await conn.execute(LOCK)).one()[1])
    outcomes: list[Any] = [None] * len(ops)
    done = await L.apply_leases(conn, [(op.action, op.values) for _, op in leases])
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
    """Apply a batch inside the open transaction; one outcome per op, in order.

    ``on_xid`` learns the transaction's id as soon as it is known.

    An append's outcome is ``(won, watched, seq, kind, codec, payload, created_ms)``, or
    ``(False, watched, key)`` when the record under ``key``, one of its guards, refused it; a
    create's is whether it created the run; an index update's is ``None``; an op that failed on
    its own is ``Failed``.
    """
    wanted: dict[tuple[str, str], None] = {}
    fence: dict[str, None] = {}
    for op in ops:
        run_id = op.run_id
        if op.epoch is not None:
            fence[run_id] = None
        if type(op) is AppendOp:
            wanted[run_id, op.key] = None
            for guard in op.unless or ():
                wanted[run_id, guard] = None
            if op.watch is not None:
                wanted[run_id, op.watch] = None
            if op.check_header:
                wanted[run_id, "header"] = None
            for entry in op.before:
                wanted[run_id, entry[0]] = None
        elif type(op) is CreateOp:
            wanted[run_id, "header"] = None
        elif type(op) is IndexOp and op.unless is not None:
            wanted[run_id, op.unless] = None
    on_xid((await conn.execute(LOCK)).one()[1])
    present: dict[tuple[str, str], tuple[int, str, str, str, int]] = {}
    epochs: dict[str, int] = {}
    seq = now = 0
    probe = {
        "runs": [r for r, _ in wanted],
        "keys": [k for _, k in wanted],
        "fenced": list(fence),
    }
    for what, run_id, key, number, kind, codec, payload, ms in await conn.execute(PROBE, probe):
        if what == 0:
            present[run_id, key] = (number, kind, codec, payload, ms)
        elif what == 1:
            epochs[run_id] = number
        else:
            seq, now = number or 0, ms
    inserts: list[tuple[Any, ...]] = []
    created: dict[str, dict[str, Any]] = {}  # run -> its index row, for runs new in this batch
    index: dict[str, dict[str, Any]] = {}  # run -> index fields, for runs that existed
    outcomes: list[Any] = []
    # Runs this batch makes ready to drive. A write fenced by an epoch comes from the run's
    # owner: the run is not claimable until that owner releases it (the release notifies).
    ready: dict[str, None] = {}
    releases: dict[str, int] = {}  # run -> the epoch of its lease, released with its append
    for op in ops:
        run_id = op.run_id
        if op.epoch is not None and epochs.get(run_id) != op.epoch:
            outcomes.append(Failed(fenced(run_id, op.epoch, epochs.get(run_id))))
            continue
        if type(op) is AppendOp:
            if op.check_header:
                header = present.get((run_id, "header"))
                try:
                    check_format(run_id, None if header is None else header[3])
                except FormatError as exc:
                    outcomes.append(Failed(exc))
                    continue
            watched = op.watch is not None and (run_id, op.watch) in present
            refused = next((g for g in op.unless or () if (run_id, g) in present), None)
            if refused is not None:
                outcomes.append((False, watched, refused))
                continue
            k = (run_id, op.key)
            record = present.get(k)
            won = record is None
            if op.before:
                taken = next((e[0] for e in op.before if (run_id, e[0]) in present), None)
                if taken is not None or not won:
                    outcomes.append(Failed(written_ahead(run_id, op.key, taken or op.key)))
                    continue
                for key, kind, payload in op.before:
                    seq += 1
                    present[run_id, key] = (seq, kind, op.codec, payload, now)
                    inserts.append((seq, run_id, key, kind, op.codec, payload, now))
            if record is None:
                seq += 1
                record = present[k] = (seq, op.kind, op.codec, op.payload, now)
                inserts.append((seq, run_id, op.key, op.kind, op.codec, op.payload, now))
            fields = created.get(run_id)
            if fields is None:
                fields = index.setdefault(run_id, {})
            if op.index:
                fields.update(op.index)
                if op.epoch is None and op.index.get("status") in READY_STATUSES:
                    ready[run_id] = None
            if op.release and op.epoch is not None:  # fenced by it above: this op's to release
                releases[run_id] = op.epoch
            outcomes.append((won, watched, *record))
        elif type(op) is CreateOp:
            k = (run_id, "header")
            header = present.get(k)
            if header is None:
                seq += 1
                present[k] = (seq, "header", "json", op.header, now)
                inserts.append((seq, run_id, "header", "header", "json", op.header, now))
                created[run_id] = {"status": "running", "agent": op.agent, "turns": 0}
                if op.epoch is None:
                    ready[run_id] = None
                outcomes.append(True)
                continue
            try:
                check_format(run_id, header[3])
            except FormatError as exc:
                outcomes.append(Failed(exc))
                continue
            outcomes.append(False)
        else:
            assert isinstance(op, IndexOp)
            unknown = set(op.fields).difference(INDEX_COLUMNS)
            if unknown:
                outcomes.append(
                    Failed(StorageError(f"unknown run index columns {sorted(unknown)}"))
                )
                continue
            if op.unless is None or (run_id, op.unless) not in present:
                target = created.get(run_id)
                (index.setdefault(run_id, {}) if target is None else target).update(op.fields)
                if op.epoch is None and op.fields.get("status") in READY_STATUSES:
                    ready[run_id] = None
            outcomes.append(None)
    if inserts or created or index:
        await _write(conn, inserts, created, index, now)
    if releases:
        values = {"runs": list(releases), "epochs": list(releases.values())}
        await conn.execute(L.RELEASE_MANY, values)
    if ready:
        await conn.execute(NOTIFY, {"runs": list(ready)})
    return outcomes


async def _write(
    conn: AsyncConnection,
    inserts: list[tuple[Any, ...]],
    created: dict[str, dict[str, Any]],
    index: dict[str, dict[str, Any]],
    now: int,
) -> None:
    r = list(zip(*inserts, strict=True)) if inserts else [()] * 7
    masks = {run_id: _encode_index(fields) for run_id, fields in index.items()}
    values = {
        "now": now,
        "seqs": list(r[0]),
        "r_runs": list(r[1]),
        "r_keys": list(r[2]),
        "r_kinds": list(r[3]),
        "r_codecs": list(r[4]),
        "r_payloads": list(r[5]),
        "r_ms": list(r[6]),
        "n_runs": list(created),
        "n_status": [f["status"] for f in created.values()],
        "n_agents": [f.get("agent") for f in created.values()],
        "n_turns": [f.get("turns") or 0 for f in created.values()],
        "n_details": [f.get("detail") for f in created.values()],
        "u_runs": list(masks),
        "u_masks": [m[0] for m in masks.values()],
        "u_status": [m[1] for m in masks.values()],
        "u_agents": [m[2] for m in masks.values()],
        "u_turns": [m[3] for m in masks.values()],
        "u_details": [m[4] for m in masks.values()],
    }
    counts = (await conn.execute(WRITE, values)).one()
    if counts[0] != len(inserts):
        raise StorageError("the journal changed under the write lock; nothing was committed")
