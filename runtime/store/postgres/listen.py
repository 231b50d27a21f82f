"""Hearing that a run became ready: ``LISTEN`` on the journal's ready channel, on a dedicated
asyncpg connection, reconnected with backoff whenever it is lost.

A lost connection is logged and retried; meanwhile the worker's polling carries on, so a wake-up
is only ever a shortcut, never what a run waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa

from runtime.logs import get_logger
from runtime.store.postgres.connect import (
    CONNECT_TIMEOUT,
    READY_CHANNEL,
    asyncpg_args,
    storage_error,
)

__all__ = ["APPLICATION_NAME", "BACKOFF", "CHECK_EVERY", "wakeups"]

log = get_logger(__name__)

APPLICATION_NAME = "bide-listen"
"""How the listening connection is named on the server (``pg_stat_activity``)."""

BACKOFF = (0.1, 10.0)
"""Seconds before the first reconnection attempt, and the most between two (doubling)."""

CHECK_EVERY = 15.0
"""Seconds of silence after which the connection is asked a ``SELECT 1``: a connection that
broke without a word (a network gone quiet) is noticed, and replaced."""


async def wakeups(
    url: sa.URL, where: str, channel: str = READY_CHANNEL
) -> AsyncIterator[str | None]:
    """The ids of runs made ready (or, on ``RECORDS_CHANNEL``, that had records committed), as
    the server notifies them; ``None`` each time the listener (re)connects, since what was
    notified while it was away is lost: look for ready runs then.

    Never ends and never raises but for cancellation: each failure is logged (``where`` names
    the server, without its password) and the connection is made again after a backoff.
    """
    import asyncpg

    args = asyncpg_args(url)  # every server of a multi-host URL, not only the first
    # What each connection heard, tagged with it: a late word from a replaced one is ignored.
    heard: asyncio.Queue[tuple[Any, str | None]] = asyncio.Queue()

    def notified(conn: Any, _pid: int, _channel: str, payload: str) -> None:
        heard.put_nowait((conn, payload))

    def terminated(conn: Any) -> None:
        heard.put_nowait((conn, None))

    failures = 0
    while True:
        conn: Any = None
        delay = BACKOFF[0]
        try:
            conn = await asyncpg.connect(
                **args,
                timeout=CONNECT_TIMEOUT,
                server_settings={"application_name": APPLICATION_NAME},
            )
            conn.add_termination_listener(terminated)
            await asyncio.wait_for(conn.add_listener(channel, notified), CONNECT_TIMEOUT)
            if failures:
                log.info("journal_listen_restored", path=where, after=failures)
            else:
                log.info("journal_listening", path=where, channel=channel)
            failures = 0
            yield None
            while True:
                try:
                    source, run_id = await asyncio.wait_for(heard.get(), CHECK_EVERY)
                except TimeoutError:
                    await asyncio.wait_for(conn.fetchval("SELECT 1"), CONNECT_TIMEOUT)
                    continue
                if source is not conn:
                    continue
                if run_id is None:
                    raise ConnectionResetError("the server closed the listening connection")
                yield run_id
        except Exception as exc:
            failures += 1
            delay = min(BACKOFF[0] * 2 ** (failures - 1), BACKOFF[1])
            error = storage_error(where, exc, doing="cannot listen for ready runs")
            # One line when the connection is lost; the failed attempts to make it again
            # (a failover takes a while) only at debug, until it is restored.
            log.log(
                logging.WARNING if failures == 1 else logging.DEBUG,
                "journal_listen_lost",
                path=where,
                error=str(error),
                retry_in=delay,
                polling=True,
            )
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.terminate()
        await asyncio.sleep(delay)
