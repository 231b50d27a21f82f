"""Queues and schedules in the store: the claim rule for queue limits, written once, and the ops
and SQL that every store applies the same way.

A queued run (``enqueue``) has a queue, an optional concurrency key, a priority, an optional
dedup key and a debounce time. A queue's limits (``QueueLimits``) bound how many of its runs
are *active* (claimed by a worker once and not yet ended: a run waiting or halted keeps its
place, as a payment waiting for approval still holds its customer), how many of them share
one concurrency key, and how many it starts per period.

The claim rule (``admit``): a worker may start a queued run that has not started yet only if
its queue has room for it by all three limits, and its debounce time has passed on the
journal's clock. A run that started once is admitted whatever the limits: it holds its own
place (a takeover after a crash, a run that waited and is ready again). The rule is decided in
the same transaction as the lease grant: a store applies a ``QueueOp("claim")`` inside its
writer's batch, under the journal's write lock, reading the queue's counts, judging them with
``admit``, acquiring the lease and marking the run started, all in one commit. Two workers on
two machines therefore never both start the last place of a queue.

The SQL here is written once for both dialects (named parameters; booleans as ``TRUE`` /
``FALSE``, which SQLite 3.23+ reads too); each store runs it on its own connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from runtime.errors import ConfigError
from runtime.ownership import Lease, Owner, boot_id
from runtime.store import names

__all__ = [
    "ACTIVE",
    "ENDED_STATUSES",
    "MARK_DONE",
    "QueueLimits",
    "QueueOp",
    "QueuedRun",
    "Queues",
    "Room",
    "ScheduleRow",
    "admit",
    "check_name",
    "clock_name",
    "pick",
    "unstarted",
]

ENDED_STATUSES = ("completed", "failed", "cancelled")
"""Index statuses of a run that has ended: it no longer holds a place in its queue."""

_Q, _QR, _U, _S = names.queues.name, names.queue_runs.name, names.runs.name, names.schedules.name
_ENDED = ", ".join(f"'{s}'" for s in ENDED_STATUSES)


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits; ``None``: no limit of that kind.

    ``concurrency``: active runs of the queue at most. ``key_concurrency``: active runs of one
    concurrency key at most (runs submitted without a key are not counted per key). ``rate``
    runs started per ``period`` seconds at most (both, or neither).
    """

    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: int | None = None
    period: float | None = None

    def __post_init__(self) -> None:
        for label, value in (
            ("concurrency", self.concurrency),
            ("key_concurrency", self.key_concurrency),
            ("rate", self.rate),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"a queue's {label} is a positive integer or None, not {value!r}")
        if (self.rate is None) != (self.period is None):
            raise ConfigError("a queue's rate limit needs both rate (runs) and period (seconds)")
        if self.period is not None and (
            isinstance(self.period, bool)
            or not isinstance(self.period, int | float)
            or not 0.001 <= self.period <= 366 * 86400
        ):
            raise ConfigError(
                f"a queue's rate period is a number of seconds from 0.001 to a year, not "
                f"{self.period!r}"
            )

    @property
    def period_ms(self) -> int | None:
        return None if self.period is None else round(self.period * 1000)

    def describe(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.key_concurrency is not None:
            parts.append(f"per key {self.key_concurrency}")
        if self.rate is not None:
            parts.append(f"{self.rate} per {self.period:g}s")
        return ", ".join(parts) or "no limits"


@dataclass(slots=True)
class Room:
    """What a claim read of one queue, under the write lock: its limits (``None``: the queue
    has none set) and its counts now."""

    limits: QueueLimits | None
    active: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    recent: int = 0
    """Runs of the queue started within its rate period, on this journal clock."""


def admit(room: Room, key: str | None) -> str | None:
    """The claim rule: why a queued run with concurrency ``key`` may not start now, or ``None``
    if it may. (A run that started once is admitted before this is asked; the debounce time is
    checked beside it.)"""
    limits = room.limits
    if limits is None:
        return None
    if limits.concurrency is not None and room.active >= limits.concurrency:
        return f"the queue has {room.active} active runs (its concurrency is {limits.concurrency})"
    if (
        key is not None
        and limits.key_concurrency is not None
        and room.by_key.get(key, 0) >= limits.key_concurrency
    ):
        return (
            f"key {key!r} has {room.by_key.get(key, 0)} active runs "
            f"(its limit is {limits.key_concurrency})"
        )
    if limits.rate is not None and room.recent >= limits.rate:
        return f"the queue started {room.recent} runs in the last {limits.period:g}s (its rate)"
    return None


def took(room: Room, key: str | None) -> None:
    """Count a run just admitted into ``room``."""
    room.active += 1
    room.recent += 1
    if key is not None:
        room.by_key[key] = room.by_key.get(key, 0) + 1


@dataclass(frozen=True, slots=True)
class QueuedRun:
    """A queued run that has not started, as a listing of candidates reads it."""

    run_id: str
    queue: str
    key: str | None
    priority: int


def pick(candidates: list[QueuedRun], rooms: dict[str, Room], limit: int) -> list[str]:
    """Of ``candidates`` (highest priority first, then oldest), the runs ``admit`` would start
    now, one after the other, ``limit`` at most: what a worker tries to claim. Only a hint: the
    claim decides again under the write lock."""
    chosen: list[str] = []
    for run in candidates:
        if len(chosen) >= limit:
            break
        room = rooms.get(run.queue)
        if room is None:
            room = rooms[run.queue] = Room(None)
        if admit(room, run.key) is None:
            took(room, run.key)
            chosen.append(run.run_id)
    return chosen


def limits_of(row: Any) -> QueueLimits | None:
    """A queue's limits from ``(concurrency, key_concurrency, rate, period_ms)``; None if all
    are NULL (no row)."""
    concurrency, per_key, rate, period_ms = row
    if concurrency is None and per_key is None and rate is None:
        return None
    return QueueLimits(concurrency, per_key, rate, None if period_ms is None else period_ms / 1000)


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule as the store keeps it: its spec (JSON object), paused or not, the first slot
    it may start (``since_ms``: wall-clock ms, UTC) and the newest slot started or skipped."""

    name: str
    spec: dict[str, Any]
    paused: bool
    since_ms: int
    last_slot_ms: int | None
    updated_ms: int


QueueAction = Literal["claim", "enqueue", "limits", "schedule"]


@dataclass(slots=True)
class QueueOp:
    """One write of queues or schedules, applied inside a writer's batch, before its other ops
    (the ops of a batch are concurrent, so any order among them is one they could have run in).

    ``claim`` (``run_id``; args owner, host, ttl_ms, take_over): acquire the run's lease if the
    claim rule admits it, and mark it started; outcome ``("granted" | "busy", lease row)`` or
    ``("full", why)``, the lease row as the store reads leases.
    ``enqueue`` (``run_id``; args queue, key, priority, dedup_key, debounce_ms, now_ms): place
    the run in its queue unless a run with the same dedup key in that queue has not ended;
    outcome: the run that holds the dedup key (``run_id`` itself if it was placed).
    ``limits`` (args queue, limits: ``QueueLimits`` or None): set or clear a queue's limits.
    ``schedule`` (args do: add | pause | resume | remove | advance, name, ...): outcome True if
    it changed something.
    """

    action: QueueAction
    run_id: str = ""
    args: dict[str, Any] = field(default_factory=dict)


def clock_name() -> str:
    """The name of the journal's clock on SQLite (and in memory): this boot's (its times mean
    nothing to another boot), or ``wall`` where the machine tells no boot id."""
    return boot_id() or "wall"


def check_name(what: str, name: object) -> str:
    """A queue's, a key's or a schedule's name: 1 to 200 printable characters."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 200
        or not name.isprintable()
        or name != name.strip()
    ):
        raise ConfigError(
            f"a {what} is 1 to 200 printable characters without surrounding spaces: {name!r}"
        )
    return name


def spec_text(spec: Mapping[str, Any]) -> str:
    return json.dumps(dict(spec), sort_keys=True, separators=(",", ":"))


# --- the SQL, written once (named parameters) -----------------------------------------------

MEMBER = f"SELECT queue, ckey, started_ms, not_before, clock FROM {_QR} WHERE run_id = :run_id"

MARK_DONE = (
    f"UPDATE {_QR} SET done = TRUE WHERE queue = :queue AND done = FALSE "
    f"AND started_ms IS NOT NULL AND run_id IN (SELECT run_id FROM {_U} WHERE status IN ({_ENDED}))"
)
"""Mark the queue's ended runs done, so that counting its active runs reads only live rows."""

ACTIVE = (
    f"SELECT q.concurrency, q.key_concurrency, q.rate, q.period_ms, "
    f"(SELECT count(*) FROM {_QR} a WHERE a.queue = :queue AND a.done = FALSE "
    "AND a.started_ms IS NOT NULL), "
    f"(SELECT count(*) FROM {_QR} a WHERE a.queue = :queue AND a.done = FALSE "
    "AND a.started_ms IS NOT NULL AND a.ckey = :key), "
    f"(SELECT count(*) FROM {_QR} a WHERE a.queue = :queue AND a.started_ms > :since "
    "AND a.clock = :clock) "
    f"FROM (SELECT 1 AS one) AS o LEFT JOIN {_Q} q ON q.name = :queue"
)
"""A queue's limits, its active runs, those of one key, and those started since ``since``."""

STARTED = (
    f"UPDATE {_QR} SET started_ms = :now, clock = :clock, "
    f"started_seq = (SELECT coalesce(max(seq), 0) FROM {names.records.name}) WHERE run_id = :run_id"
)

DEDUP = (
    f"SELECT a.run_id, a.started_ms, u.status, a.created_ms FROM {_QR} a "
    f"LEFT JOIN {_U} u ON u.run_id = a.run_id WHERE a.queue = :queue AND a.dedup_key = :dedup "
    f"AND a.done = FALSE AND (u.status IS NULL OR u.status NOT IN ({_ENDED})) "
    "ORDER BY a.created_ms LIMIT 1"
)

DEBOUNCE = f"UPDATE {_QR} SET not_before = :not_before, clock = :clock WHERE run_id = :run_id"

ENQUEUE = (
    f"INSERT INTO {_QR} (run_id, queue, ckey, priority, dedup_key, not_before, clock, done, "
    "created_ms) VALUES (:run_id, :queue, :key, :priority, :dedup, :not_before, :clock, FALSE, "
    ":created) ON CONFLICT (run_id) DO NOTHING"
)

SET_LIMITS = (
    f"INSERT INTO {_Q} (name, concurrency, key_concurrency, rate, period_ms, updated_ms) "
    "VALUES (:queue, :concurrency, :key_concurrency, :rate, :period_ms, :now) "
    "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
    "key_concurrency = excluded.key_concurrency, rate = excluded.rate, "
    "period_ms = excluded.period_ms, updated_ms = excluded.updated_ms"
)
CLEAR_LIMITS = f"DELETE FROM {_Q} WHERE name = :queue"

LIST_LIMITS = (
    f"SELECT name, concurrency, key_concurrency, rate, period_ms, "
    f"(SELECT count(*) FROM {_QR} a LEFT JOIN {_U} u ON u.run_id = a.run_id "
    f"WHERE a.queue = {_Q}.name AND a.done = FALSE AND a.started_ms IS NOT NULL "
    f"AND (u.status IS NULL OR u.status NOT IN ({_ENDED}))), "
    f"(SELECT count(*) FROM {_QR} a WHERE a.queue = {_Q}.name AND a.started_ms IS NULL) "
    f"FROM {_Q} ORDER BY name"
)

CANDIDATES = (
    f"SELECT a.run_id, a.queue, a.ckey, a.priority, a.not_before, a.clock FROM {_QR} a "
    f"JOIN {_U} u ON u.run_id = a.run_id WHERE a.started_ms IS NULL AND u.status = 'submitted' "
    "ORDER BY a.priority DESC, a.created_ms, a.run_id LIMIT :scan"
)
"""Queued runs not yet started whose submit finished, highest priority first, then oldest."""

ROOMS = (
    "SELECT a.queue, a.ckey, count(*) FROM "
    f"{_QR} a JOIN {_U} u ON u.run_id = a.run_id WHERE a.done = FALSE "
    f"AND a.started_ms IS NOT NULL AND u.status NOT IN ({_ENDED}) GROUP BY a.queue, a.ckey"
)
"""Active runs per queue and key, for ``pick``."""

RECENT = (
    f"SELECT a.queue, count(*) FROM {_QR} a JOIN {_Q} q ON q.name = a.queue "
    "WHERE q.period_ms IS NOT NULL AND a.clock = :clock AND a.started_ms > :now - q.period_ms "
    "GROUP BY a.queue"
)

ALL_LIMITS = f"SELECT name, concurrency, key_concurrency, rate, period_ms FROM {_Q}"


def unstarted(runs: str) -> str:
    """What each dialect's ``claimable`` adds (``runs``: how it names ``bide_runs``): a queued
    run that never started is claimed only through its queue (``candidates``), where the claim
    rule is applied."""
    return (
        f"NOT (EXISTS (SELECT 1 FROM {_QR} qr WHERE qr.run_id = {runs}.run_id "
        "AND qr.started_ms IS NULL))"
    )


SCHEDULE_ADD = (
    f"INSERT INTO {_S} (name, spec, paused, since_ms, last_slot_ms, updated_ms) "
    "VALUES (:name, :spec, FALSE, :since, NULL, :now) ON CONFLICT (name) DO NOTHING"
)
SCHEDULE_PAUSE = f"UPDATE {_S} SET paused = :paused, updated_ms = :now WHERE name = :name"
SCHEDULE_REMOVE = f"DELETE FROM {_S} WHERE name = :name"
SCHEDULE_ADVANCE = (
    f"UPDATE {_S} SET last_slot_ms = :slot, updated_ms = :now WHERE name = :name "
    "AND (last_slot_ms IS NULL OR last_slot_ms < :slot)"
)
SCHEDULES = f"SELECT name, spec, paused, since_ms, last_slot_ms, updated_ms FROM {_S} ORDER BY name"


def schedule_sql(args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The statement of a ``schedule`` op and its parameters."""
    do, now = args["do"], args["now"]
    if do == "add":
        values = {"name": args["name"], "spec": args["spec"], "since": args["since"], "now": now}
        return SCHEDULE_ADD, values
    if do in ("pause", "resume"):
        return SCHEDULE_PAUSE, {"name": args["name"], "paused": do == "pause", "now": now}
    if do == "remove":
        return SCHEDULE_REMOVE, {"name": args["name"]}
    if do == "advance":
        return SCHEDULE_ADVANCE, {"name": args["name"], "slot": args["slot"], "now": now}
    raise ConfigError(f"unknown schedule op {do!r}")


def schedule_row(row: Any) -> ScheduleRow:
    name, spec, paused, since_ms, last_slot_ms, updated_ms = row
    return ScheduleRow(name, json.loads(spec), bool(paused), since_ms, last_slot_ms, updated_ms)


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue as ``queues()`` lists it: its limits, its active runs and those waiting."""

    name: str
    limits: QueueLimits | None
    active: int
    waiting: int


@runtime_checkable
class Queues(Protocol):
    """What a store does for queues and schedules (every bide store does it)."""

    async def enqueue(
        self,
        run_id: str,
        queue: str,
        *,
        key: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
        debounce: float | None = None,
    ) -> str: ...

    async def claim(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease: ...

    async def candidates(self, *, limit: int) -> list[str]: ...

    async def set_limits(self, queue: str, limits: QueueLimits | None) -> None: ...

    async def queues(self) -> list[QueueInfo]: ...

    async def queue_of(self, run_id: str) -> str | None: ...

    async def schedule_op(self, **args: Any) -> bool: ...

    async def schedules(self) -> list[ScheduleRow]: ...

    async def check_run(self, run_id: str) -> bool: ...

    async def slot_clock_ms(self) -> int:
        """Wall-clock ms (UTC) by the journal's clock: what schedules' slots are judged on."""
        ...


# --- a queue op, step by step, the same for every SQL store -----------------------------------

GHOST_MS = 60_000
"""A dedup key's holder with no run after this long (wall clock) was never submitted (its
submitter died between placing it and creating it): the key is free again."""


@dataclass(frozen=True, slots=True)
class Sql:
    """Run ``sql`` with ``params``; the reply is its rows (a list of tuples), or for a write one
    empty tuple per row it changed."""

    sql: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Acquire:
    """Acquire the run's lease by the store's own lease rule; the reply is ``(granted, row)``."""

    run_id: str
    args: dict[str, Any]


Step = Sql | Acquire


def steps(op: QueueOp, now: int, clock: str, wall: int) -> Any:
    """A generator of the op's steps (``Sql``, ``Acquire``), sent each reply, returning the op's
    outcome. ``now`` is the journal's clock (ms) and ``clock`` names it (this boot on SQLite,
    ``server`` on PostgreSQL); ``wall`` is the wall clock (ms), for people and ordering."""
    args = op.args
    if op.action == "claim":
        return (yield from _claim(op.run_id, args, now, clock))
    if op.action == "enqueue":
        return (yield from _enqueue(op.run_id, args, now, clock, wall))
    if op.action == "limits":
        limits: QueueLimits | None = args["limits"]
        if limits is None:
            yield Sql(CLEAR_LIMITS, {"queue": args["queue"]})
        else:
            values = {
                "queue": args["queue"],
                "concurrency": limits.concurrency,
                "key_concurrency": limits.key_concurrency,
                "rate": limits.rate,
                "period_ms": limits.period_ms,
                "now": wall,
            }
            yield Sql(SET_LIMITS, values)
        return None
    sql, values = schedule_sql({**args, "now": wall})
    return bool((yield Sql(sql, values)))


def run_steps(gen: Any, execute: Any, acquire: Any) -> Any:
    """Drive ``steps`` synchronously: ``execute(sql, params)`` and ``acquire(run_id, args)``
    answer its steps."""
    reply: Any = None
    try:
        while True:
            step = gen.send(reply)
            if type(step) is Sql:
                reply = execute(step.sql, step.params)
            else:
                reply = acquire(step.run_id, step.args)
    except StopIteration as stop:
        return stop.value


async def arun_steps(gen: Any, execute: Any, acquire: Any) -> Any:
    """``run_steps`` for a store whose ``execute`` and ``acquire`` are coroutines."""
    reply: Any = None
    try:
        while True:
            step = gen.send(reply)
            if type(step) is Sql:
                reply = await execute(step.sql, step.params)
            else:
                reply = await acquire(step.run_id, step.args)
    except StopIteration as stop:
        return stop.value


def _claim(run_id: str, args: dict[str, Any], now: int, clock: str) -> Any:
    member = yield Sql(MEMBER, {"run_id": run_id})
    if member and member[0][2] is None:
        queue, key, _started, not_before, at = member[0]
        if not_before is not None and at == clock and not_before > now:
            return ("full", f"its debounce window is open for {not_before - now} ms more")
        yield Sql(MARK_DONE, {"queue": queue})
        (row,) = yield Sql(ACTIVE, {"queue": queue, "key": key, "since": now, "clock": clock})
        limits = limits_of(row[:4])
        if limits is not None and limits.period_ms is not None:
            (row,) = yield Sql(
                ACTIVE,
                {"queue": queue, "key": key, "since": now - limits.period_ms, "clock": clock},
            )
        room = Room(limits, row[4], {} if key is None else {key: row[5]}, row[6])
        why = admit(room, key)
        if why is not None:
            return ("full", why)
    granted, lease = yield Acquire(run_id, args)
    if not granted:
        return ("busy", lease)
    if member and member[0][2] is None:
        yield Sql(STARTED, {"run_id": run_id, "now": now, "clock": clock})
    return ("granted", lease)


def _enqueue(run_id: str, args: dict[str, Any], now: int, clock: str, wall: int) -> Any:
    queue, dedup, debounce_ms = args["queue"], args["dedup_key"], args["debounce_ms"]
    not_before = None if debounce_ms is None else now + debounce_ms
    if dedup is not None:
        holders = yield Sql(DEDUP, {"queue": queue, "dedup": dedup})
        for holder, started, status, created in holders:
            if holder == run_id:
                break
            if status is None and wall - created > GHOST_MS:
                continue
            if started is None and not_before is not None:
                # Debounced: the first run starts once no submit of its key came for a while.
                yield Sql(
                    DEBOUNCE,
                    {"run_id": holder, "not_before": not_before, "clock": clock},
                )
            return holder
    values = {
        "run_id": run_id,
        "queue": queue,
        "key": args["key"],
        "priority": args["priority"],
        "dedup": dedup,
        "not_before": not_before,
        "clock": clock,
        "created": wall,
    }
    yield Sql(ENQUEUE, values)
    return run_id


def with_queue_ops(ops: list[Any], first: Any, rest: Any) -> list[Any]:
    """Apply a batch whose ops include ``QueueOp``s: those first (``first(queue_ops)``), then
    the rest (``rest(other_ops)``), one outcome per op in order."""
    out: list[Any] = [None] * len(ops)
    queued = [i for i, op in enumerate(ops) if type(op) is QueueOp]
    others = [i for i, op in enumerate(ops) if type(op) is not QueueOp]
    for i, outcome in zip(queued, first([ops[i] for i in queued]), strict=True):
        out[i] = outcome
    if others:
        for i, outcome in zip(others, rest([ops[i] for i in others]), strict=True):
            out[i] = outcome
    return out


async def with_queue_ops_async(ops: list[Any], first: Any, rest: Any) -> list[Any]:
    """``with_queue_ops`` for a store whose ``first`` and ``rest`` are coroutines."""
    out: list[Any] = [None] * len(ops)
    queued = [i for i, op in enumerate(ops) if type(op) is QueueOp]
    others = [i for i, op in enumerate(ops) if type(op) is not QueueOp]
    for i, outcome in zip(queued, await first([ops[i] for i in queued]), strict=True):
        out[i] = outcome
    if others:
        for i, outcome in zip(others, await rest([ops[i] for i in others]), strict=True):
            out[i] = outcome
    return out
