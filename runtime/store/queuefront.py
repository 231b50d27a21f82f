"""The ``Queues`` calls as the SQL stores make them (``store.queues``): each call checked at the
boundary, turned into a ``QueueOp`` for the store's writer or into a read, and its outcome
turned back into a value. A store supplies ``_queue_read`` (a read on its own connection),
``_owner_text`` and ``_claimed`` (a lease from a claim's outcome)."""

from __future__ import annotations

import time
from typing import Any

from runtime.errors import ConfigError, QueueFull
from runtime.ownership import Lease, Owner, busy
from runtime.store.checks import check_run_id, ttl_ms
from runtime.store.queues import (
    ALL_LIMITS,
    CANDIDATES,
    LIST_LIMITS,
    RECENT,
    ROOMS,
    SCHEDULES,
    QueuedRun,
    QueueInfo,
    QueueLimits,
    QueueOp,
    Room,
    ScheduleRow,
    check_name,
    limits_of,
    pick,
    schedule_row,
    spec_text,
)

__all__ = ["CANDIDATE_SCAN", "QueueFront"]

CANDIDATE_SCAN = 500
"""Queued runs read per look for candidates to claim, highest priority first."""

PRIORITY_RANGE = (-1_000_000, 1_000_000)


class QueueFront:
    """Queues and schedules for a store with a writer (``_submit``)."""

    async def _submit(self, op: Any) -> Any:
        raise NotImplementedError

    async def _queue_read(self, sql: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def _owner_text(self, owner: Owner) -> str:
        raise NotImplementedError

    def _claimed(self, run_id: str, payload: Any, owner: Owner | None) -> Lease:
        raise NotImplementedError

    async def _queue_clock(self) -> tuple[int, str]:
        """The journal's clock now (ms) and its name, as the claim rule reads them."""
        raise NotImplementedError

    async def enqueue(
        self,
        run_id: str,
        queue: str,
        *,
        key: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
        debounce: float | None = None,
    ) -> str:
        """Place ``run_id`` in ``queue`` (before the run is created: it is claimed only through
        its queue). With ``dedup_key``: if a run of the queue with that key has not ended, place
        nothing and return that run's id (and with ``debounce``, push its start back). Returns
        the id of the run that holds the place."""
        check_run_id(run_id)
        check_name("queue name", queue)
        if key is not None:
            check_name("concurrency key", key)
        if dedup_key is not None:
            check_name("dedup key", dedup_key)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigError(f"a priority is an integer, not {priority!r}")
        if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
            raise ConfigError(f"a priority is within ±1,000,000, not {priority}")
        debounce_ms = None
        if debounce is not None:
            if dedup_key is None:
                raise ConfigError("debounce needs a dedup_key: the submits it merges share one")
            if (
                isinstance(debounce, bool)
                or not isinstance(debounce, int | float)
                or not 0 < debounce <= 86400
            ):
                raise ConfigError(f"debounce is a number of seconds up to a day, not {debounce!r}")
            debounce_ms = round(debounce * 1000)
        args = {
            "queue": queue,
            "key": key,
            "priority": priority,
            "dedup_key": dedup_key,
            "debounce_ms": debounce_ms,
        }
        return str(await self._submit(QueueOp("enqueue", run_id, args)))

    async def claim(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        """Acquire the run's lease as a worker claiming it (``Store.acquire``), and for a
        queued run that has not started, only if its queue's limits admit it
        (``queues.admit``), in the same transaction; ``QueueFull`` if they do not."""
        check_run_id(run_id)
        args = {
            "owner": self._owner_text(owner),
            "host": owner.host,
            "ttl_ms": ttl_ms(ttl),
            "take_over": take_over,
        }
        outcome = await self._submit(QueueOp("claim", run_id, args))
        what, payload = outcome
        if what == "full":
            raise QueueFull(
                f"run {run_id!r} may not start now: {payload}", why=payload, run_id=run_id
            )
        if what == "busy":
            raise busy(self._claimed(run_id, payload, None))
        return self._claimed(run_id, payload, owner)

    async def candidates(self, *, limit: int) -> list[str]:
        """Queued runs that have not started and that the claim rule would start now, one after
        the other: highest priority first, then oldest; ``limit`` at most. A hint for a
        worker: its claim decides again."""
        rows = await self._queue_read(CANDIDATES, {"scan": CANDIDATE_SCAN})
        if not rows:
            return []
        now, clock = await self._queue_clock()
        rooms: dict[str, Room] = {}
        for name, *limits in await self._queue_read(ALL_LIMITS, {}):
            rooms[name] = Room(limits_of(limits))
        for queue, key, count in await self._queue_read(ROOMS, {}):
            room = rooms.setdefault(queue, Room(None))
            room.active += count
            if key is not None:
                room.by_key[key] = room.by_key.get(key, 0) + count
        for queue, count in await self._queue_read(RECENT, {"now": now, "clock": clock}):
            rooms.setdefault(queue, Room(None)).recent = count
        runs = [
            QueuedRun(run_id, queue, key, priority)
            for run_id, queue, key, priority, not_before, at in rows
            if not_before is None or at != clock or not_before <= now
        ]
        return pick(runs, rooms, limit)

    async def queue_of(self, run_id: str) -> str | None:
        """The queue ``run_id`` was submitted to, if any."""
        check_run_id(run_id)
        rows = await self._queue_read(
            "SELECT queue FROM bide_queue_runs WHERE run_id = :run_id", {"run_id": run_id}
        )
        return rows[0][0] if rows else None

    async def set_limits(self, queue: str, limits: QueueLimits | None) -> None:
        """Set ``queue``'s limits (``None``: clear them; the queue then has none)."""
        check_name("queue name", queue)
        if limits is not None and not isinstance(limits, QueueLimits):
            raise ConfigError(f"limits are a QueueLimits or None, not {limits!r}")
        await self._submit(QueueOp("limits", "", {"queue": queue, "limits": limits}))

    async def queues(self) -> list[QueueInfo]:
        """The queues that have limits set, by name, with their active and waiting runs."""
        rows = await self._queue_read(LIST_LIMITS, {})
        return [
            QueueInfo(name, limits_of((c, k, r, p)), active, waiting)
            for name, c, k, r, p, active, waiting in rows
        ]

    async def schedule_op(self, **args: Any) -> bool:
        """A schedule op (``QueueOp("schedule")``): add, pause, resume, remove, advance."""
        if "spec" in args:
            args["spec"] = spec_text(args["spec"])
        check_name("schedule name", args.get("name"))
        return bool(await self._submit(QueueOp("schedule", "", args)))

    async def schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        return [schedule_row(row) for row in await self._queue_read(SCHEDULES, {})]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
