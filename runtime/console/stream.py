"""A run's events as server-sent events (``GET /events?id=RUN``): journaled ones with their
cursor as the event id, so a browser that reconnects (``Last-Event-ID``) gets exactly what it
missed; a comment every ``HEARTBEAT`` seconds keeps proxies from closing a quiet stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from runtime.errors import ConfigError
from runtime.events.hub import IDLE
from runtime.events.types import Cursor, Event
from runtime.journal import Journal

__all__ = ["HEARTBEAT", "QUEUED", "events_response"]

HEARTBEAT = 15.0
"""Seconds of silence after which the stream sends a comment line."""

QUEUED = 256
"""Events read ahead of a slow client; past that the reader waits (the journal keeps the rest;
no drive ever waits on it)."""


async def events_response(request: Request, journal: Journal) -> Response:
    """The run's events after ``Last-Event-ID`` (or ``?after=``), then live, until the run ends
    or ``IDLE`` seconds pass without one (the browser then reconnects with its last id)."""
    run_id = request.query_params.get("id", "")
    after = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        start = Cursor.parse(after)
        if not await journal.store.check_run(run_id):
            return PlainTextResponse(f"404: no run {run_id!r}", 404)
    except ConfigError as exc:
        return PlainTextResponse(f"400: {exc}", 400)
    return StreamingResponse(
        _sse(journal, run_id, str(start)),
        media_type="text/event-stream",
        headers={"x-accel-buffering": "no"},
    )


def frame(event: Event) -> str:
    """One event as an SSE frame: ``id`` (journaled events only) and ``data`` (its JSON)."""
    data = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"), default=str)
    head = f"id: {event.cursor}\n" if event.cursor is not None else ""
    return f"{head}data: {data}\n\n"


async def _sse(journal: Journal, run_id: str, after: str) -> AsyncIterator[str]:
    queue: asyncio.Queue[Event | None] = asyncio.Queue(QUEUED)

    async def read() -> None:
        try:
            async for event in journal.events(run_id, after=after, idle=IDLE):
                await queue.put(event)
        finally:
            await queue.put(None)

    reader = asyncio.get_running_loop().create_task(read())
    try:
        yield "retry: 2000\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), HEARTBEAT)
            except TimeoutError:
                yield ": still here\n\n"
                continue
            if event is None:
                break
            yield frame(event)
        await reader  # its error, if it failed, ends the response as one
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
