"""Schedules: a cron expression in a named time zone that starts one run per due slot.

``journal.schedules.add("report", cron="0 9 * * 1-5", agent="reports:agent", input="...",
tz="Europe/Paris")`` keeps the schedule in the journal; every worker on the journal starts its
due slots (``runtime.scheduler``). Each slot's run has an id derived from the schedule and the
slot (``schedule:report:20261204T080000Z``), created by ``submit``, which makes a run only if
its id is new: however many workers see the slot and however they crash, one run per slot.

Cron slots are wall-clock times in the schedule's zone, evaluated by ``cronsim`` (which keeps
Debian cron's rules across daylight-saving changes: a 02:30 job on a spring-forward day runs at
03:00, once; on a fall-back day, once). Whether a slot is due is judged on the journal's clock
(``Queues.slot_clock_ms``): PostgreSQL's clock; on SQLite this host's boot clock plus the wall
time at boot, so every process on the host agrees, and a step of the wall clock after boot
neither fires a slot twice nor skips one (slots follow real elapsed time since boot).

Missed slots (no worker was up when they were due): ``skip`` starts a slot at most ``LATE``
seconds late and skips older ones; ``catch-up`` starts the newest ``catch_up`` of them, oldest
first, and skips older ones. Slots before the schedule was added are never started.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runtime.errors import ConfigError
from runtime.jsontext import unstorable
from runtime.store.queues import Queues, ScheduleRow, check_name

__all__ = ["LATE", "Schedule", "ScheduleInfo", "Schedules"]

LATE = 60.0
"""Seconds a slot may be late and still start under the ``skip`` policy."""

MAX_CATCH_UP = 1000

Missed = Literal["skip", "catch-up"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule's spec, validated when built: a ``cron`` expression (five fields, or six with
    seconds first), a time zone by IANA name, the agent spec (``module:attr``) and the input of
    each run, the missed-slot policy, and the queue its runs go to (if any)."""

    name: str
    cron: str
    agent: str
    input: str
    tz: str = "UTC"
    missed: Missed = "skip"
    catch_up: int = 1
    queue: str | None = None

    def __post_init__(self) -> None:
        from cronsim import CronSim, CronSimError

        check_name("schedule name", self.name)
        if ":" in self.name:
            raise ConfigError(f"a schedule name has no ':' (it is part of run ids): {self.name!r}")
        if not isinstance(self.cron, str):
            raise ConfigError(f"a cron expression is a string, not {self.cron!r}")
        try:
            zone = ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"unknown time zone {self.tz!r} (an IANA name: Europe/Paris)"
            ) from exc
        try:
            next(CronSim(self.cron, dt.datetime.now(zone)))
        except (CronSimError, StopIteration, ValueError) as exc:
            raise ConfigError(f"bad cron expression {self.cron!r}: {exc}") from exc
        if not isinstance(self.agent, str) or ":" not in self.agent:
            raise ConfigError(f"a schedule's agent is a spec MODULE:ATTR, not {self.agent!r}")
        if not isinstance(self.input, str):
            raise ConfigError("a schedule's input is a string")
        problem = unstorable(self.input, name="input")
        if problem is not None:
            raise ConfigError(f"schedule {self.name!r}: cannot journal its {problem}")
        if self.missed not in ("skip", "catch-up"):
            raise ConfigError(f"missed is 'skip' or 'catch-up', not {self.missed!r}")
        if (
            isinstance(self.catch_up, bool)
            or not isinstance(self.catch_up, int)
            or not 1 <= self.catch_up <= MAX_CATCH_UP
        ):
            raise ConfigError(f"catch_up is an integer from 1 to {MAX_CATCH_UP}: {self.catch_up!r}")
        if self.queue is not None:
            check_name("queue name", self.queue)

    def to_json(self) -> dict[str, Any]:
        return {
            "cron": self.cron,
            "agent": self.agent,
            "input": self.input,
            "tz": self.tz,
            "missed": self.missed,
            "catch_up": self.catch_up,
            "queue": self.queue,
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Schedule:
        return cls(
            name=name,
            cron=data["cron"],
            agent=data["agent"],
            input=data["input"],
            tz=data.get("tz", "UTC"),
            missed=data.get("missed", "skip"),
            catch_up=data.get("catch_up", 1),
            queue=data.get("queue"),
        )

    def run_id(self, slot_ms: int) -> str:
        """The id of the run of the slot at ``slot_ms`` (wall-clock ms, UTC)."""
        when = dt.datetime.fromtimestamp(slot_ms / 1000, dt.UTC)
        return f"schedule:{self.name}:{when.strftime('%Y%m%dT%H%M%SZ')}"

    def next_slot(self, after_ms: int) -> int:
        """The first slot strictly after ``after_ms`` (wall-clock ms, UTC)."""
        from cronsim import CronSim

        start = dt.datetime.fromtimestamp(after_ms / 1000, ZoneInfo(self.tz))
        return _ms(next(CronSim(self.cron, start)))

    def due(self, since_ms: int, last_ms: int | None, now_ms: int) -> tuple[list[int], int | None]:
        """The slots to start now, oldest first, and the newest slot now due (started or
        skipped: the schedule's cursor moves to it), given when the schedule was added, its
        cursor and the time now (all wall-clock ms per the journal's clock)."""
        from cronsim import CronSim

        anchor = since_ms if last_ms is None else max(since_ms, last_ms)
        if now_ms <= anchor:
            return [], None
        # Backwards from now: the floor of now's second is the first slot looked at.
        start = dt.datetime.fromtimestamp((now_ms + 0.5) / 1000, ZoneInfo(self.tz))
        slots = CronSim(self.cron, start, reverse=True)
        if self.missed == "skip":
            floor, most = max(anchor, now_ms - round(LATE * 1000)), None
        else:
            floor, most = anchor, self.catch_up
        newest: int | None = None
        found: list[int] = []
        for when in slots:
            slot = _ms(when)
            if slot <= anchor:
                break
            if newest is None:
                newest = slot
            if slot <= floor or (most is not None and len(found) >= most):
                break
            found.append(slot)
            if len(found) >= MAX_CATCH_UP:
                break
        return found[::-1], newest


def _ms(when: dt.datetime) -> int:
    return round(when.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as ``list`` shows it: its spec, paused or not, its last started or skipped
    slot's run id, and its next slot (wall-clock ms, UTC)."""

    schedule: Schedule
    paused: bool
    last_run: str | None
    last_slot_ms: int | None
    next_slot_ms: int | None
    next_run: str | None


class Schedules:
    """A journal's schedules: ``journal.schedules``."""

    def __init__(self, store: Any):
        if not isinstance(store, Queues):
            raise ConfigError(f"the journal's store ({type(store).__name__}) keeps no schedules")
        self._store = store

    async def add(
        self,
        name: str,
        *,
        cron: str,
        agent: str,
        input: str,
        tz: str = "UTC",
        missed: Missed = "skip",
        catch_up: int = 1,
        queue: str | None = None,
    ) -> Schedule:
        """Keep a new schedule; its first slot is the first one after now. A name in use is a
        ``ConfigError`` (remove it first)."""
        schedule = Schedule(name, cron, agent, input, tz, missed, catch_up, queue)
        now = await self._store.slot_clock_ms()
        if not await self._store.schedule_op(
            do="add", name=name, spec=schedule.to_json(), since=now
        ):
            raise ConfigError(f"a schedule named {name!r} exists: remove it first")
        return schedule

    async def list(self) -> list[ScheduleInfo]:
        """Every schedule, by name, with its last and next runs."""
        now = await self._store.slot_clock_ms()
        return [info(row, now) for row in await self._store.schedules()]

    async def get(self, name: str) -> ScheduleInfo:
        for found in await self.list():
            if found.schedule.name == name:
                return found
        raise ConfigError(f"no schedule named {name!r}")

    async def pause(self, name: str) -> None:
        """Start no more slots until ``resume`` (slots due meanwhile are missed slots)."""
        await self._change("pause", name)

    async def resume(self, name: str) -> None:
        await self._change("resume", name)

    async def remove(self, name: str) -> None:
        """Forget the schedule; the runs it started stay."""
        await self._change("remove", name)

    async def _change(self, do: str, name: str) -> None:
        check_name("schedule name", name)
        if not await self._store.schedule_op(do=do, name=name):
            raise ConfigError(f"no schedule named {name!r}")


def info(row: ScheduleRow, now_ms: int) -> ScheduleInfo:
    schedule = Schedule.from_json(row.name, row.spec)
    last = row.last_slot_ms
    after = max(now_ms, row.since_ms)
    upcoming = None if row.paused else schedule.next_slot(after)
    return ScheduleInfo(
        schedule,
        row.paused,
        None if last is None else schedule.run_id(last),
        last,
        upcoming,
        None if upcoming is None else schedule.run_id(upcoming),
    )
