"""Durable waits inside a tool: a timer (``ToolContext.sleep``, ``sleep_until``) and a signal
(``ToolContext.receive``).

A wait pauses the run as ``Waiting`` instead of holding a process: the first time a tool reaches
its n-th wait, the wait is journaled (``wait/<call>/<n>``) with its due time on the journal's
clock (``Store.clock_ms``: PostgreSQL's, or this host's boot clock on SQLite), and the drive
stops. A worker drives the run again once it is due, or once a signal is committed after it
stopped (the claim rule in ``runtime.store.decide``); the tool runs again from its start, as
after an ``interrupt``, and its n-th wait then returns (due) or waits again (not yet).

A receive takes the oldest signal of its name that no receive was given, and journals which
(``received/<call>/<n>``) before it returns it: each signal is given once, in commit order, and
a tool that runs again gets the same one. A receive whose timeout came with no signal journals
that, and raises ``SignalTimeout`` on every run of the tool after, even if a signal comes later
(that one waits for the next receive).

On SQLite a due time is on this boot's clock; the wait also keeps its wall-clock time, the one
clock that outlives a reboot: a wait journaled on another boot is judged by it once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
import weakref
from collections.abc import Mapping
from typing import Any

from runtime import records as R
from runtime.drive import Drive, Misuse
from runtime.errors import ConfigError, SignalTimeout, ToolError
from runtime.jsontext import check_signal_name
from runtime.logs import get_logger
from runtime.ownership import boot_id
from runtime.records import Record
from runtime.result import Waiting
from runtime.state import CallState
from runtime.stops import wall_iso
from runtime.tools import Interrupted, Safety

__all__ = ["MAX_WAIT_SECONDS", "Waiter"]

log = get_logger(__name__)

MAX_WAIT_SECONDS = 366 * 24 * 3600.0
"""The longest a sleep or a receive's timeout may be: a year and a day. Longer is a mistake
(milliseconds given as seconds, say), refused."""


def _seconds(seconds: Any, what: str) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
        or seconds > MAX_WAIT_SECONDS
    ):
        raise Misuse(
            ConfigError(
                f"{what} is a number of seconds from 0 to {MAX_WAIT_SECONDS:.0f}, not {seconds!r}"
            )
        )
    return float(seconds)


_taking: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
"""One lock per run being driven in this process: the calls of one turn run concurrently, and
two receives of one name must not both take the oldest signal. (Across processes the lease
keeps a run to one drive.)"""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Waiter:
    """One run of a call's tool's waits (``ToolContext.sleep``, ``receive``): made afresh each
    time the tool runs, so that its n-th wait meets the n-th wait journaled."""

    __slots__ = ("cs", "drive", "n", "safety")

    def __init__(self, drive: Drive, cs: CallState, safety: Safety):
        self.drive = drive
        self.cs = cs
        self.safety = safety
        self.n = 0

    async def sleep(self, seconds: float) -> None:
        ms = round(_seconds(seconds, "sleep()") * 1000)
        await self._sleep(ms, _wall_ms() + ms)

    async def sleep_until(self, when: dt.datetime) -> None:
        if not isinstance(when, dt.datetime) or when.tzinfo is None:
            raise Misuse(
                ConfigError(
                    f"sleep_until() takes a datetime with a time zone (e.g. UTC), not {when!r}"
                )
            )
        at = round(when.timestamp() * 1000)
        ms = max(0, at - _wall_ms())
        _seconds(ms / 1000, "sleep_until()'s time from now")
        await self._sleep(ms, at)

    async def _sleep(self, ms: int, at: int) -> None:
        n = self._next("sleep()")
        recorded = self.cs.waits.get(n)
        if recorded is None:
            first = await self.drive.store.clock_ms() + ms
            await self._journal(n, {"what": "sleep", "due_ms": first, "at_ms": at})
            if ms == 0:
                return  # a time already past: journaled, so every run of the tool meets it
            log.info("run_sleeping", call_id=self.cs.call.id, n=n, due_ms=first)
            raise self._paused(Waiting(kind="timer", due_ms=first, at=wall_iso(at), **self._of()))
        self._same(recorded, "sleep")
        came, due = await self._due(recorded)
        if came or due is None:
            return
        at = int(recorded.payload["at_ms"])
        raise self._paused(Waiting(kind="timer", due_ms=due, at=wall_iso(at), **self._of()))

    async def receive(
        self,
        name: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a durable timeout, not asyncio's
        expect: Any = Any,
        schema: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            check_signal_name(name)
        except ConfigError as exc:
            raise Misuse(exc) from None
        ms = None if timeout is None else round(_seconds(timeout, "receive()'s timeout") * 1000)
        n = self._next("receive()")
        import pydantic  # only a tool that receives needs it

        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(expect)
        given = self.cs.received.get(n)
        recorded = self.cs.waits.get(n)
        if recorded is not None:
            self._same(recorded, "receive", name)
        if given is None:
            given = await self._take(n, name, recorded, ms, schema or adapter.json_schema())
        if given.payload.get("timed_out"):
            raise SignalTimeout(
                f"no signal {name!r} came within the receive's timeout",
                run_id=self.drive.run_id,
                call_id=self.cs.call.id,
            )
        signal = await self.drive.store.get(self.drive.run_id, str(given.payload["signal"]))
        if signal is None:  # pragma: no cover - the journal never loses a record
            raise ToolError(f"the signal {given.payload['signal']!r} given is not in the journal")
        try:
            return adapter.validate_python(signal.payload.get("value"))
        except pydantic.ValidationError as exc:
            raise ToolError(f"signal {name!r} does not fit what was expected: {exc}") from exc

    async def _take(
        self,
        n: int,
        name: str,
        recorded: Record | None,
        ms: int | None,
        schema: Mapping[str, Any],
    ) -> Record:
        """Give the n-th wait the oldest signal no receive was given; or its timeout, if it
        came; or journal the wait and pause."""
        lock = _taking.get(self.drive.run_id)
        if lock is None:
            lock = _taking[self.drive.run_id] = asyncio.Lock()
        async with lock:
            return await self._take_locked(n, name, recorded, ms, schema)

    async def _take_locked(
        self,
        n: int,
        name: str,
        recorded: Record | None,
        ms: int | None,
        schema: Mapping[str, Any],
    ) -> Record:
        drive, call = self.drive, self.cs.call
        store = drive.store
        # Read now, not from the drive's state: a signal sent while the tool ran is in the
        # mailbox, and a receive of a call the history folded away consumed what it took.
        mailbox = await store.load(drive.run_id, prefix=R.signal_prefix(name))
        taken = {
            r.payload.get("signal") for r in await store.load(drive.run_id, prefix="received/")
        }
        fresh = next((s for s in mailbox if s.key not in taken), None)
        if fresh is not None:
            payload: dict[str, Any] = {"signal": fresh.key, "timed_out": False}
        elif recorded is not None and (await self._due(recorded))[0]:
            payload = {"signal": None, "timed_out": True}
        else:
            if recorded is None:
                wait: dict[str, Any] = {"what": "receive", "name": name, "schema": dict(schema)}
                if ms is not None:
                    wait["due_ms"] = await store.clock_ms() + ms
                    wait["at_ms"] = _wall_ms() + ms
                recorded = await self._journal(n, wait)
                log.info("run_receiving", call_id=call.id, n=n, signal=name)
            _, due = await self._due(recorded)
            at = recorded.payload.get("at_ms")
            raise self._paused(
                Waiting(
                    kind="signal",
                    name=name,
                    schema=recorded.payload.get("schema"),
                    due_ms=due,
                    at=None if at is None else wall_iso(int(at)),
                    **self._of(),
                )
            )
        appended = await drive.append(
            R.received_key(call.id, n), R.RECEIVED, {"call_id": call.id, "n": n, **payload}
        )
        assert appended.record is not None
        self.cs.received[n] = appended.record
        log.info("run_received", call_id=call.id, n=n, signal=name, timed_out=payload["timed_out"])
        return appended.record

    async def _due(self, recorded: Record) -> tuple[bool, int | None]:
        """Whether a journaled wait's time came, on the journal's clock, and when it is due
        (None: never, a receive without a timeout). A wait timed on another boot's clock
        (SQLite, after a reboot) is judged by its wall-clock time, carried over to this boot's
        clock."""
        payload = recorded.payload
        due = payload.get("due_ms")
        if due is None:
            return False, None
        now = await self.drive.store.clock_ms()
        clock = payload.get("clock")
        if clock is not None and clock != boot_id():
            due = now + max(0, int(payload["at_ms"]) - _wall_ms())
        return now >= int(due), int(due)

    async def _journal(self, n: int, wait: dict[str, Any]) -> Record:
        call = self.cs.call
        payload = {"call_id": call.id, "n": n, **wait}
        if "due_ms" in wait:
            payload["clock"] = getattr(self.drive.store, "clock_id", None)
        appended = await self.drive.append(R.wait_key(call.id, n), R.WAIT, payload)
        assert appended.record is not None
        self.cs.waits[n] = appended.record
        return appended.record

    def _next(self, what: str) -> int:
        call = self.cs.call
        if self.safety is Safety.SIDE_EFFECT and not self.cs.resumable:
            # A tool that waits runs again from its start once its wait ends: only a side
            # effect that is continued through its handle, never re-run, may wait.
            raise Misuse(
                ConfigError(
                    f"tool {call.name} is a SIDE_EFFECT and called {what}: only READ_ONLY and"
                    " IDEMPOTENT tools may wait, since the tool runs again once the wait ends",
                    run_id=self.drive.run_id,
                    call_id=call.id,
                )
            )
        self.n += 1
        return self.n

    def _same(self, recorded: Record, what: str, name: str | None = None) -> None:
        """The n-th wait journaled is the one the tool asks for now, or the tool changed."""
        payload = recorded.payload
        if payload.get("what") != what or (name is not None and payload.get("name") != name):
            journaled = payload.get("what"), payload.get("name")
            raise Misuse(
                ConfigError(
                    f"tool {self.cs.call.name}'s wait {recorded.payload.get('n')} is now a "
                    f"{what} ({name!r}) but was journaled as {journaled[0]} ({journaled[1]!r}):"
                    " a tool must wait in the same order each time it runs",
                    run_id=self.drive.run_id,
                    call_id=self.cs.call.id,
                )
            )

    def _of(self) -> dict[str, Any]:
        call = self.cs.call
        return {"call_id": call.id, "tool": call.name, "arguments": call.arguments}

    @staticmethod
    def _paused(waiting: Waiting) -> Interrupted:
        return Interrupted(waiting)
