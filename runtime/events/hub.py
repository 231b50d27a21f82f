"""What a drive tells the followers of its run in this process, without ever waiting on them.

One ``Hub`` per store, made when a first follower subscribes. A commit only sets each of the
run's followers' wake-up flag (the follower reads the records from the journal itself), and a
live event is put in each follower's bounded buffer, dropping the oldest when it is full: a slow
follower costs the drive a few dictionary lookups, never a wait. On PostgreSQL the hub also
listens to the journal's record notifications, so commits from other processes wake it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

from runtime.events.types import Event, TextDelta, TurnStarted
from runtime.logs import get_logger

__all__ = ["IDLE", "LIVE_BUFFER", "Follower", "Hub", "asking", "committed", "delta", "hub_of"]

log = get_logger(__name__)

IDLE = 300.0
"""Seconds without a journaled event after which following a run ends by default; follow again
with the last cursor to carry on."""

LIVE_BUFFER = 1024
"""Live events a follower may hold unread; past that the oldest are dropped (counted)."""

_hubs: weakref.WeakKeyDictionary[Any, Hub] = weakref.WeakKeyDictionary()


class Follower:
    """One consumer of one run's events: a wake-up flag and a bounded buffer of live events."""

    __slots__ = ("_read", "dropped", "live", "run_id", "wake")

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.wake = asyncio.Event()
        self.live: deque[tuple[int | None, Event]] = deque(maxlen=LIVE_BUFFER)
        """Live events not read yet, each after the seq of the run's latest record this process
        had committed when it happened (``None``: not known, so after what is read next)."""
        self.dropped = 0
        """Live events dropped because the follower did not read them in time."""
        self._read = 0

    def read(self, seq: int) -> None:
        """The follower has read the run's records up to ``seq``."""
        self._read = max(self._read, seq)

    def push(self, after: int | None, event: Event) -> None:
        if len(self.live) == self.live.maxlen:
            self.dropped += 1
        self.live.append((after, event))
        self.wake.set()

    def due(self, before: int | None) -> Iterator[Event]:
        """The live events that happened before record ``before`` was committed (``None``: all
        that happened up to the latest record read), in order."""
        while self.live:
            after, event = self.live[0]
            if before is None:
                if after is not None and after > self._read:
                    return
            elif after is None or after >= before:
                return
            self.live.popleft()
            yield event


class Hub:
    """The followers of runs in one store, in this process; and, on a store that notifies
    commits (PostgreSQL), the one listening task that wakes them, alive while any follows."""

    def __init__(self, store: Any):
        self._store = weakref.ref(store)
        self._followers: dict[str, set[Follower]] = {}
        self._last: dict[str, int] = {}  # run -> its latest record this process committed
        self._listener: asyncio.Task[None] | None = None

    @property
    def listens(self) -> bool:
        """Whether commits of other processes wake followers (else they poll the journal)."""
        return self._listener is not None and not self._listener.done()

    def subscribe(self, run_id: str) -> Follower:
        follower = Follower(run_id)
        self._followers.setdefault(run_id, set()).add(follower)
        store = self._store()
        source = getattr(store, "record_wakeups", None)
        if self._listener is None and source is not None:
            self._listener = asyncio.get_running_loop().create_task(self._listen(source()))
        return follower

    async def unsubscribe(self, follower: Follower) -> None:
        followers = self._followers.get(follower.run_id)
        if followers is not None:
            followers.discard(follower)
            if not followers:
                del self._followers[follower.run_id]
                self._last.pop(follower.run_id, None)
        if not self._followers and self._listener is not None:
            listener, self._listener = self._listener, None
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    def committed(self, run_id: str, seq: int | None = None) -> None:
        followers = self._followers.get(run_id)
        if followers:
            if seq is not None:
                self._last[run_id] = max(seq, self._last.get(run_id, 0))
            for follower in followers:
                follower.wake.set()

    def publish(self, event: Event) -> None:
        followers = self._followers.get(event.run_id)
        if followers:
            after = self._last.get(event.run_id)
            for follower in followers:
                follower.push(after, event)

    def following(self, run_id: str) -> bool:
        return run_id in self._followers

    async def _listen(self, source: AsyncIterator[str | None]) -> None:
        try:
            async for run_id in source:
                if run_id is None:  # (re)connected: what was said meanwhile is lost, so look
                    for followers in self._followers.values():
                        for follower in followers:
                            follower.wake.set()
                else:
                    self.committed(run_id)
        except Exception as exc:
            # The source is meant never to fail; if it does, say so, and wake every follower:
            # with no listener (``listens`` is False) they poll the journal instead.
            log.warning("events_listener_failed", error=f"{type(exc).__name__}: {exc}")
            for followers in self._followers.values():
                for follower in followers:
                    follower.wake.set()
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()


def hub_of(store: Any) -> Hub:
    """The hub of ``store`` in this process (made on first use)."""
    hub = _hubs.get(store)
    if hub is None:
        hub = _hubs[store] = Hub(store)
    return hub


def committed(store: Any, run_id: str, seq: int) -> None:
    """A drive of this process committed records of ``run_id``, up to ``seq``: wake its
    followers, if any."""
    hub = _hubs.get(store)
    if hub is not None:
        hub.committed(run_id, seq)


_asking: contextvars.ContextVar[tuple[Hub, str, int] | None] = contextvars.ContextVar(
    "bide_asking", default=None
)


_NOTHING = contextlib.nullcontext()  # stateless: one for every drive nobody follows


def asking(store: Any, run_id: str, n: int) -> contextlib.AbstractContextManager[None]:
    """Around the drive's request for turn ``n``: tells followers the turn started, and lets
    the model's ``delta`` calls reach them. Costs no object when nobody follows the run (a
    drive waiting on its model keeps nothing more)."""
    hub = _hubs.get(store)
    if hub is None or not hub.following(run_id):
        return _NOTHING
    return _asking_turn(hub, run_id, n)


@contextlib.contextmanager
def _asking_turn(hub: Hub, run_id: str, n: int) -> Iterator[None]:
    hub.publish(TurnStarted(run_id, None, None, n=n))
    token = _asking.set((hub, run_id, n))
    try:
        yield
    finally:
        _asking.reset(token)


def delta(text: str) -> None:
    """Tell whoever follows the run being driven that the model produced ``text`` (a piece of
    the turn it is streaming). For model adapters; a no-op outside a drive or when nobody
    follows. Live only: the turn's journaled record holds the whole text."""
    current = _asking.get()
    if current is None or not text:
        return
    hub, run_id, n = current
    hub.publish(TextDelta(run_id, None, None, n=n, text=text))
