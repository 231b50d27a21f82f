"""Leases on PostgreSQL (``runtime.ownership``): one row per run in ``bide_leases``, timed by the
server's clock.

Acquiring is one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (the row lock it takes makes it
single-winner). Every lease op runs inside a batch of the group-commit writer, under the
journal's write lock, so that it shares its commit and can never fall between a batch's fencing
check and that batch's commit: an append of an old epoch either committed before the takeover
or is refused after it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from runtime.ownership import Lease, Owner
from runtime.store import schema
from runtime.store.decide import READY_STATUSES, WAKE_KINDS
from runtime.store.postgres.connect import NOW_MS, READY_CHANNEL
from runtime.store.queues import unstarted

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "ACQUIRE",
    "CLAIMABLE",
    "CLOCK",
    "READ",
    "RELEASE",
    "RENEW",
    "Action",
    "apply_lease",
    "apply_leases",
    "lease_of",
    "owner_text",
]

Action = Literal["acquire", "renew", "release"]

_L, _U, _R = schema.leases.name, schema.runs.name, schema.records.name

_COLUMNS = (
    "l.epoch, l.owner, l.acquired_ms, l.expires_ms, l.released, "
    f"(NOT l.released AND l.expires_ms > {NOW_MS}) AS live"
)
"""A lease as ``lease_of`` reads it; ``live`` is decided by the server's clock."""

ACQUIRE = sa.text(
    f"WITH c AS (SELECT {NOW_MS} AS now) "
    f"INSERT INTO {_L} AS l (run_id, epoch, owner, host, acquired_ms, expires_ms, released) "
    "SELECT :run_id, 1, :owner, :host, c.now, c.now + :ttl_ms, false FROM c "
    "ON CONFLICT (run_id) DO UPDATE SET epoch = l.epoch + 1, owner = excluded.owner, "
    "host = excluded.host, acquired_ms = excluded.acquired_ms, "
    "expires_ms = excluded.expires_ms, released = false "
    "WHERE l.released OR l.expires_ms <= excluded.acquired_ms "
    "OR l.epoch = CAST(:take_over AS integer) "
    f"RETURNING {_COLUMNS}"
)

# An expired lease is over even if nobody took it yet: renewing it would revive an owner whose
# attempt a reconciler may already have settled (it must acquire anew, with a new epoch).
RENEW = sa.text(
    f"UPDATE {_L} AS l SET expires_ms = {NOW_MS} + :ttl_ms "
    "WHERE l.run_id = :run_id AND l.epoch = :epoch AND NOT l.released "
    f"AND l.expires_ms > {NOW_MS} RETURNING {_COLUMNS}"
)

_READY = ", ".join(f"'{s}'" for s in READY_STATUSES)

# A run released while its index says it is to be driven (a submitted run, a drive that yielded
# to a stopping worker) is ready: the release notifies the workers in its own transaction.
RELEASE = sa.text(
    f"WITH r AS (UPDATE {_L} AS l SET released = true, expires_ms = {NOW_MS} "
    "WHERE l.run_id = :run_id AND l.epoch = :epoch AND NOT l.released RETURNING l.run_id) "
    f"SELECT (SELECT count(pg_notify('{READY_CHANNEL}', u.run_id)) FROM {_U} AS u "
    f"WHERE u.run_id = r.run_id AND u.status IN ({_READY})) FROM r"
)

READ = sa.text(f"SELECT {_COLUMNS} FROM {_L} AS l WHERE l.run_id = :run_id")

CLOCK = sa.text(f"SELECT {NOW_MS}")
"""The journal's clock: settle times are judged on it, as leases are."""

_WAKES = ", ".join(f"'{kind}'" for kind in WAKE_KINDS)

CLAIMABLE = sa.text(
    f"SELECT u.run_id, {_COLUMNS} FROM {_U} AS u LEFT JOIN {_L} AS l ON l.run_id = u.run_id "
    # Ready runs; and waiting or halted runs that are due on the server's clock, or that a
    # record committed after they stopped may wake (``decide.WAIT_STATUSES``).
    "WHERE (u.status IN ('running', 'submitted') OR (u.status IN ('waiting', 'halted') AND "
    f"(u.due_ms <= {NOW_MS} OR EXISTS (SELECT 1 FROM {_R} AS r WHERE r.run_id = u.run_id "
    f"AND r.seq > coalesce(u.wake_seq, 0) AND r.kind IN ({_WAKES}))))) "
    "AND (l.run_id IS NULL OR l.released "
    f"OR l.expires_ms <= {NOW_MS} OR l.host = CAST(:host AS text)) AND {unstarted('u')} "
    # A queued run that never started is claimed through its queue (store.queues).
    "AND (CAST(:agent AS text) IS NULL OR u.agent = CAST(:agent AS text)) "
    # A worker with an agent claims only the runs that agent started.
    # Orphans first (a lease nobody released whose time ran out: its drive died), so a backlog
    # of runs never driven does not delay a takeover; then runs nobody holds; then the live
    # leases of this host, of which only a gone process's may be taken: a worker that found
    # those first would find nothing else to claim. Then least recently updated.
    f"ORDER BY CASE WHEN NOT l.released AND l.expires_ms <= {NOW_MS} THEN 0 "
    "WHEN l.run_id IS NULL OR l.released THEN 1 ELSE 2 END, u.updated_ms, u.run_id "
    "LIMIT :limit"
)


async def apply_lease(conn: AsyncConnection, action: Action, values: dict[str, Any]) -> Any:
    """One lease op inside the writer's transaction. ``acquire``: ``(granted, row)``, the
    lease's row as ``lease_of`` reads it (the new lease if granted, else the holder's, or
    ``None``); ``renew``: the renewed row, or ``None`` if the epoch moved on; ``release``:
    whether it released."""
    if action == "acquire":
        granted = (await conn.execute(ACQUIRE, values)).first()
        if granted is not None:
            return True, tuple(granted)
        current = (await conn.execute(READ, {"run_id": values["run_id"]})).first()
        return False, None if current is None else tuple(current)
    if action == "renew":
        row = (await conn.execute(RENEW, values)).first()
        return None if row is None else tuple(row)
    return (await conn.execute(RELEASE, values)).first() is not None


_P_ACQUIRE = (
    "unnest(CAST(:runs AS text[]), CAST(:owners AS text[]), CAST(:hosts AS text[]), "
    "CAST(:ttls AS bigint[]), CAST(:take_overs AS integer[])) "
    "AS p(run_id, owner, host, ttl_ms, take_over)"
)

# One statement for a batch's acquires, each of a different run (``ACQUIRE``'s rules). Rows a
# CTE changes are invisible to the rest of the statement: the last branch reads each refused
# run's lease as it stands, which is as it stays.
ACQUIRE_MANY = sa.text(
    f"WITH c AS (SELECT {NOW_MS} AS now), "
    f"up AS (UPDATE {_L} AS l SET epoch = l.epoch + 1, owner = p.owner, host = p.host, "
    "acquired_ms = c.now, expires_ms = c.now + p.ttl_ms, released = false "
    f"FROM {_P_ACQUIRE}, c WHERE l.run_id = p.run_id AND (l.released OR l.expires_ms <= c.now "
    f"OR l.epoch = p.take_over) RETURNING l.run_id, {_COLUMNS}), "
    f"ins AS (INSERT INTO {_L} AS l (run_id, epoch, owner, host, acquired_ms, expires_ms, "
    f"released) SELECT p.run_id, 1, p.owner, p.host, c.now, c.now + p.ttl_ms, false "
    f"FROM {_P_ACQUIRE}, c WHERE NOT EXISTS (SELECT 1 FROM {_L} AS x WHERE x.run_id = p.run_id) "
    f"ON CONFLICT (run_id) DO NOTHING RETURNING l.run_id, {_COLUMNS}) "
    "SELECT true, * FROM up UNION ALL SELECT true, * FROM ins UNION ALL "
    f"SELECT false, l.run_id, {_COLUMNS} FROM {_L} AS l "
    "WHERE l.run_id = ANY(CAST(:runs AS text[])) AND l.run_id NOT IN (SELECT run_id FROM up)"
)

RENEW_MANY = sa.text(
    f"UPDATE {_L} AS l SET expires_ms = {NOW_MS} + p.ttl_ms FROM unnest(CAST(:runs AS text[]), "
    "CAST(:epochs AS integer[]), CAST(:ttls AS bigint[])) AS p(run_id, epoch, ttl_ms) "
    "WHERE l.run_id = p.run_id AND l.epoch = p.epoch AND NOT l.released "
    f"AND l.expires_ms > {NOW_MS} RETURNING l.run_id, {_COLUMNS}"
)

RELEASE_MANY = sa.text(
    f"WITH r AS (UPDATE {_L} AS l SET released = true, expires_ms = {NOW_MS} "
    "FROM unnest(CAST(:runs AS text[]), CAST(:epochs AS integer[])) AS p(run_id, epoch) "
    "WHERE l.run_id = p.run_id AND l.epoch = p.epoch AND NOT l.released RETURNING l.run_id), "
    f"n AS (SELECT count(pg_notify('{READY_CHANNEL}', u.run_id)) AS n FROM {_U} AS u "
    f"JOIN r ON u.run_id = r.run_id WHERE u.status IN ({_READY})) "
    "SELECT run_id FROM r UNION ALL SELECT NULL FROM n"
)
"""``RELEASE`` for many runs; the branch on ``n`` makes the notifications happen."""


async def apply_leases(
    conn: AsyncConnection, ops: list[tuple[Action, dict[str, Any]]]
) -> list[Any]:
    """Many lease ops inside the writer's transaction, one outcome each as ``apply_lease``
    gives it. The first op of each run goes into one statement per action (releases, then
    renewals, then acquires: the ops of a batch are concurrent, so any order is theirs); a
    second op of a run already in it follows alone, in order."""
    out: list[Any] = [None] * len(ops)
    seen: set[str] = set()
    first: dict[Action, list[int]] = {"release": [], "renew": [], "acquire": []}
    later: list[int] = []
    for i, (action, values) in enumerate(ops):
        run_id = values["run_id"]
        (later if run_id in seen else first[action]).append(i)
        seen.add(run_id)
    if first["release"]:
        idx = first["release"]
        values = {"runs": [ops[i][1]["run_id"] for i in idx]}
        values["epochs"] = [ops[i][1]["epoch"] for i in idx]
        released = {row[0] for row in await conn.execute(RELEASE_MANY, values)}
        for i in idx:
            out[i] = ops[i][1]["run_id"] in released
    if first["renew"]:
        idx = first["renew"]
        values = {
            "runs": [ops[i][1]["run_id"] for i in idx],
            "epochs": [ops[i][1]["epoch"] for i in idx],
            "ttls": [ops[i][1]["ttl_ms"] for i in idx],
        }
        renewed = {row[0]: tuple(row[1:]) for row in await conn.execute(RENEW_MANY, values)}
        for i in idx:
            out[i] = renewed.get(ops[i][1]["run_id"])
    if first["acquire"]:
        idx = first["acquire"]
        values = {
            key: [ops[i][1][name] for i in idx]
            for key, name in (
                ("runs", "run_id"),
                ("owners", "owner"),
                ("hosts", "host"),
                ("ttls", "ttl_ms"),
                ("take_overs", "take_over"),
            )
        }
        got = {
            row[1]: (bool(row[0]), tuple(row[2:]))
            for row in await conn.execute(ACQUIRE_MANY, values)
        }
        for i in idx:
            out[i] = got.get(ops[i][1]["run_id"], (False, None))
    for i in later:
        out[i] = await apply_lease(conn, *ops[i])
    return out


def owner_text(owner: Owner) -> str:
    return json.dumps(owner.to_json(), separators=(",", ":"))


def lease_of(run_id: str, row: Any, owner: Owner | None = None) -> Lease | None:
    """A lease from ``(epoch, owner, acquired_ms, expires_ms, released, live)``, or ``None``
    when the row is all NULL (a LEFT JOIN that found no lease); with ``owner`` when the caller
    holds it (the row's owner is then that one)."""
    epoch, text, acquired_ms, expires_ms, released, live = row
    if epoch is None:
        return None
    return Lease(
        run_id=run_id,
        epoch=epoch,
        owner=Owner.from_json(text) if owner is None else owner,
        acquired_ms=acquired_ms,
        expires_ms=expires_ms,
        released=bool(released),
        live=bool(live),
    )
