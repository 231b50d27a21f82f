"""The runs the console lists: each with its status derived from its records, one page at a time."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.journal import Journal, RunRow
from runtime.ownership import is_alive
from runtime.stops import Stop, halted_on, in_flight_on, status_of, waiting_on

__all__ = ["LIVE", "Page", "Row", "list_page"]

LIVE = ("running", "submitted", "orphaned", "waiting", "halted")
"""Statuses the index may hold stale (a killed driver writes nothing): these are re-derived."""

_SCAN_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Row:
    """One run as the table shows it."""

    run_id: str
    status: str
    agent: str | None
    turns: int
    created_ms: int
    updated_ms: int
    halted: tuple[Stop, ...] = ()
    waiting: tuple[Stop, ...] = ()
    in_flight: tuple[Stop, ...] = ()
    """Side effects running now, under a live owner's lease (not halted)."""

    @property
    def cursor(self) -> str:
        return f"{self.created_ms}:{self.run_id}"


@dataclass(frozen=True, slots=True)
class Page:
    rows: tuple[Row, ...]
    next_cursor: str | None


async def _row(journal: Journal, r: RunRow) -> Row:
    row = Row(r.run_id, r.status, r.agent, r.turns, r.created_ms, r.updated_ms)
    if r.status not in LIVE:
        return row  # an end marker or a cancel request wrote this status with its record
    state = await journal.state(r.run_id)
    if state is None:
        return row
    driving = r.lease if is_alive(r.lease) else None
    return Row(
        r.run_id,
        status_of(state, driving, submitted=r.status == "submitted"),
        r.agent,
        len(state.turns),
        r.created_ms,
        r.updated_ms,
        halted_on(state, driving),
        waiting_on(state),
        in_flight_on(state, driving),
    )


async def list_page(
    journal: Journal,
    *,
    status: str | None = None,
    prefix: str | None = None,
    limit: int = 25,
    before: str | None = None,
) -> Page:
    """Runs newest first, ``limit`` of them after the cursor ``before``, with the next cursor.

    A run the index calls ``running`` may really be halted (its driver was killed mid-call), so a
    filter on a live status looks through every live index status and keeps what the records say.
    """
    if status not in LIVE:
        page = await journal.list_runs(status=status, prefix=prefix, limit=limit, before=before)
        rows = [await _row(journal, r) for r in page.runs]
        return Page(tuple(rows), page.next_cursor)
    found: list[Row] = []
    for listed in LIVE:
        matches: list[Row] = []
        cursor = before
        while len(matches) <= limit:
            page = await journal.list_runs(
                status=listed, prefix=prefix, limit=_SCAN_LIMIT, before=cursor
            )
            for r in page.runs:
                row = await _row(journal, r)
                if row.status == status:
                    matches.append(row)
            cursor = page.next_cursor
            if cursor is None:
                break
        found.extend(matches)
    found.sort(key=lambda row: (row.created_ms, row.run_id), reverse=True)
    more = len(found) > limit
    rows = found[:limit]
    return Page(tuple(rows), rows[-1].cursor if more and rows else None)


async def stopped(journal: Journal, *, limit: int = 500) -> list[Row]:
    """The halted and waiting runs (at most ``limit`` of each), for the chart of ages."""
    out: list[Row] = []
    for status in ("halted", "waiting"):
        out.extend((await list_page(journal, status=status, limit=limit)).rows)
    return out
