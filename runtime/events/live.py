"""Following a run: its journaled events after a cursor, then live ones as they come, in commit
order and never twice (``follow``; a drive streamed as it happens is ``runtime.events.stream``).

The journal is the only source of journaled events: a wake-up (a commit in this process, a
notification from PostgreSQL, or the poll's timer) only says "read again after your cursor".
So a follower that was slow, or away, or is another process, loses nothing: it reads from the
journal what it missed. Live-only events (``TurnStarted``, ``TextDelta``) come from this
process's drives and are dropped when they are stale or when a follower's buffer overflows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from runtime import records as R
from runtime.errors import ConfigError
from runtime.events.hub import IDLE, Follower, hub_of
from runtime.events.told import from_record
from runtime.events.types import (
    Cursor,
    Event,
)
from runtime.result import RunResult
from runtime.store.checks import check_run_id
from runtime.store.protocol import Store

__all__ = ["IDLE", "POLL", "POLL_LISTENING", "READ_GAP", "events_of", "follow"]

POLL = 0.2
"""Seconds between two reads of the journal when nothing woke the follower: how late a commit
of another process is seen on a store that does not notify (SQLite)."""

READ_GAP = 0.05
"""Seconds a follower lets pass between two reads of the journal however often it is woken: a
run committing hundreds of records a second is read in batches, at most 20 reads a second per
follower."""

POLL_LISTENING = 5.0
"""The same on a store whose commits notify followers (PostgreSQL): a safety net only."""


async def follow(
    store: Store,
    run_id: str,
    *,
    after: int | str = 0,
    live: bool = True,
    idle: float | None = IDLE,
) -> AsyncIterator[Event]:
    """The run's events after ``after`` (a cursor: the ``cursor`` of the last event seen, 0 for
    all), read from the journal; then, if ``live``, each new one as it is committed, by any
    process, until the run's end record, or until ``idle`` seconds pass without a journaled
    event (``None``: no bound). ``ConfigError`` if there is no such run."""
    check_run_id(run_id)
    start = Cursor.parse(after)
    if idle is not None and not idle > 0:
        raise ConfigError(f"idle is a positive number of seconds or None, not {idle!r}")
    if not await store.check_run(run_id):
        raise ConfigError(f"no run {run_id!r} in {store.path}", run_id=run_id)
    async for event in events_of(store, run_id, start, live=live, idle=idle, drive=None):
        yield event


async def events_of(
    store: Store,
    run_id: str,
    after: Cursor,
    *,
    live: bool,
    idle: float | None,
    drive: asyncio.Task[RunResult[Any]] | None,
    follower: Follower | None = None,
) -> AsyncIterator[Event]:
    hub = hub_of(store)
    if live and follower is None:
        follower = hub.subscribe(run_id)
    # Live events are yielded where they happened among the journaled ones: before the first
    # record committed after them. Resuming inside a record's events: read that record again,
    # and skip what was seen.
    cursor = after.seq if after.part is None else after.seq - 1
    skip = (after.seq, after.part) if after.part is not None else None
    quiet_since = time.monotonic()
    read_at = quiet_since - READ_GAP
    try:
        while True:
            if follower is not None and (gap := READ_GAP - (time.monotonic() - read_at)) > 0:
                await asyncio.sleep(gap)
            finishing = drive is not None and drive.done()
            if follower is not None:
                follower.wake.clear()  # before reading: a commit after the read wakes us
            read_at = time.monotonic()
            records = await store.load(run_id, after=cursor)
            ended = False
            for record in records:
                if follower is not None:  # what happened live before this record committed
                    for live_event in follower.due(record.seq):
                        yield live_event
                for i, event in enumerate(from_record(record)):
                    if skip is not None and record.seq == skip[0] and i <= skip[1]:
                        continue
                    yield event
                cursor = record.seq
                ended = ended or record.kind == R.END
            if records:
                quiet_since = time.monotonic()
            if follower is None or ended:
                return
            follower.read(cursor)
            for live_event in follower.due(None):
                yield live_event
            if finishing:
                return  # the drive had returned before that read: nothing more is coming
            wait = POLL_LISTENING if hub.listens else POLL
            if idle is not None and drive is None:
                left = idle - (time.monotonic() - quiet_since)
                if left <= 0:
                    return
                wait = min(wait, left)
            waits: set[asyncio.Future[object]] = {asyncio.ensure_future(follower.wake.wait())}
            if drive is not None:
                waits.add(drive)  # type: ignore[arg-type]
            try:
                await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waits:
                    if waiter is not drive:
                        waiter.cancel()
    finally:
        if follower is not None:
            await hub.unsubscribe(follower)
