"""The runs as every view lists them (``list``, ``list --json``, the console's table): each run's
status derived from its records, and what it is stopped on, one page at a time.

The index row (``RunRow``) is a hint: a killed driver writes nothing, so a run the index calls
``running`` may be halted, and an ended or cancelled run may keep a call that may have acted.
Every listed run is therefore read from its records; a run one of whose records cannot be read
is listed ``unreadable``, naming the record, and never hides the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime import records as R
from runtime.errors import FormatError
from runtime.journal import Journal, RunRow
from runtime.messages import Usage
from runtime.ownership import Lease, is_alive
from runtime.records import Record
from runtime.sessions import SESSION_PREFIX, messages_of
from runtime.state import RunState
from runtime.stops import Stop, halted_on, in_flight_on, status_of, stopped_on, waiting_on
from runtime.timeline import UNREADABLE, Unreadable, read

__all__ = [
    "ORPHANED",
    "Page",
    "Row",
    "list_page",
    "list_sessions",
    "records_of",
    "row_of",
    "session_runs",
]

ORPHANED = "orphaned"
"""The status of a run that is not finished and that no live process drives."""

_ENDED = ("completed", "failed")
"""Index statuses written with the end record, never overwritten: the index can be trusted."""
_OPEN = ("running", "submitted", "waiting", "halted", "cancelled", ORPHANED)
"""Index statuses that may be stale (a killed driver writes nothing; a driver that halts after a
cancel request rewrites it): runs listed under these are re-derived from their records."""
_SCAN = 200
"""Index rows read per query while looking for runs whose records match a filter."""


@dataclass(frozen=True, slots=True)
class Row:
    """One run as the views list it: its status derived from its records, and what it waits on."""

    run_id: str
    status: str
    agent: str | None
    turns: int
    created_ms: int
    updated_ms: int
    halted: tuple[Stop, ...] = ()
    waiting: tuple[Stop, ...] = ()
    unreadable: str | None = None
    """Why the run cannot be read (naming the record), if it cannot."""
    stopped: Mapping[str, Any] | None = None
    """For an orphaned run: why its last drive stopped short of an end."""
    in_flight: tuple[Stop, ...] = ()
    """Side effects running now, under a live owner's lease (not halted)."""
    lease: Lease | None = None
    driven: bool = False
    """Whether a live owner drives the run now."""
    usage: Usage = field(default_factory=Usage)
    """What the run's recorded turns consumed."""
    parent: str | None = None
    """The run this one is a child of (``runtime.children``), if it is one."""

    @property
    def cursor(self) -> str:
        """Pass as ``before=`` to list the runs older than this one."""
        return f"{self.created_ms}:{self.run_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "agent": self.agent,
            "turns": self.turns,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "halted": [s.to_json() for s in self.halted],
            "waiting": [s.to_json() for s in self.waiting],
            "unreadable": self.unreadable,
            "stopped": dict(self.stopped) if self.stopped is not None else None,
            "in_flight": [s.to_json() for s in self.in_flight],
            "lease": self.lease.to_json() if self.lease is not None else None,
            "driven": self.driven,
            "usage": self.usage.to_json(),
            "parent": self.parent,
        }


@dataclass(frozen=True, slots=True)
class Page:
    rows: tuple[Row, ...]
    next_cursor: str | None
    """Pass as ``before=`` for the next (older) page; ``None`` on the last page."""


async def row_of(journal: Journal, r: RunRow) -> Row:
    """The run the index row ``r`` names, as its records tell it."""
    records = await records_of(journal, r.run_id)
    driving = r.lease if is_alive(r.lease) else None
    tell = _facts(driving, r.status == "submitted")
    facts = read(r.run_id, records, tell) if isinstance(records, list) else records
    if facts is None:
        return Row(r.run_id, r.status, r.agent, r.turns, r.created_ms, r.updated_ms)
    if isinstance(facts, Unreadable):
        return Row(
            r.run_id,
            UNREADABLE,
            r.agent,
            r.turns,
            r.created_ms,
            r.updated_ms,
            unreadable=facts.reason,
        )
    status, turns, halted, waiting, stopped, in_flight, usage = facts
    return Row(
        r.run_id,
        status,
        r.agent,
        turns,
        r.created_ms,
        r.updated_ms,
        halted,
        waiting,
        stopped=stopped,
        in_flight=in_flight,
        lease=r.lease,
        driven=driving is not None,
        usage=usage,
        parent=_parent(records) if isinstance(records, list) else None,
    )


def _parent(records: list[Record]) -> str | None:
    start = next((r for r in records if r.key == R.START), None)
    link = (
        start.payload.get("parent")
        if start is not None and isinstance(start.payload, dict)
        else None
    )
    parent = link.get("run_id") if isinstance(link, Mapping) else None
    return parent if isinstance(parent, str) else None


async def list_page(
    journal: Journal,
    *,
    status: str | None = None,
    unresolved: bool = False,
    prefix: str | None = None,
    limit: int = 50,
    before: str | None = None,
    tokens_over: int | None = None,
    roots: bool = False,
) -> Page:
    """Runs newest first: at most ``limit`` after the cursor ``before``, and the next cursor.

    ``status`` keeps the runs whose records say so (``unreadable`` runs are kept under every
    filter: their status is unknown); ``unresolved`` keeps the runs with a call that may have
    acted and has no result, whatever their status; ``tokens_over`` the runs whose turns
    consumed more tokens (input and output) than that; ``roots`` the runs that are no other
    run's child (``runtime.children``).
    """
    if status is None and not unresolved and tokens_over is None and not roots:
        page = await journal.list_runs(prefix=prefix, limit=limit, before=before)
        rows = [await row_of(journal, r) for r in page.runs if not _a_session(r)]
        return Page(tuple(rows), page.next_cursor)
    # Read the runs the index cannot rule out; keep the ones whose records match.
    listed: tuple[str | None, ...]
    if status in _ENDED:
        listed = (status,)
    elif unresolved or roots or status == UNREADABLE or status is None:  # None: by tokens_over
        listed = (None,)
    else:
        listed = _OPEN
    found: list[Row] = []
    for index_status in listed:
        matches: list[Row] = []
        cursor = before
        while len(matches) <= limit:  # one more than asked for says whether a next page exists
            page = await journal.list_runs(
                status=index_status, prefix=prefix, limit=max(limit, _SCAN), before=cursor
            )
            for r in page.runs:
                if _a_session(r):
                    continue
                row = await row_of(journal, r)
                if _keeps(
                    row, status=status, unresolved=unresolved, tokens_over=tokens_over
                ) and not (roots and row.parent is not None):
                    matches.append(row)
            cursor = page.next_cursor
            if cursor is None:
                break
        found.extend(matches)
    found.sort(key=lambda row: (row.created_ms, row.run_id), reverse=True)
    rows = found[:limit]
    more = len(found) > limit
    return Page(tuple(rows), rows[-1].cursor if more and rows else None)


def _a_session(r: RunRow) -> bool:
    """A session's own journal (``runtime.sessions``), not a run."""
    return r.run_id.startswith(SESSION_PREFIX)


def _keeps(row: Row, *, status: str | None, unresolved: bool, tokens_over: int | None) -> bool:
    if row.unreadable is not None:
        return True  # its status is unknown: it may be the run the filter looks for
    if status is not None and row.status != status:
        return False
    if tokens_over is not None and row.usage.total_tokens <= tokens_over:
        return False
    return not unresolved or bool(row.halted)


async def records_of(journal: Journal, run_id: str) -> list[Record] | Unreadable | None:
    """The run's records; ``None`` if there is no such run; ``Unreadable`` if one of them cannot
    be decoded (or the run is written in a format this bide does not know)."""
    try:
        if not await journal.store.check_run(run_id):
            return None
        return await journal.store.load(run_id)
    except FormatError as exc:  # CorruptJournal is one
        return Unreadable(run_id, str(exc))


_Facts = tuple[
    str,
    int,
    tuple[Stop, ...],
    tuple[Stop, ...],
    Mapping[str, Any] | None,
    tuple[Stop, ...],
    Usage,
]


def _facts(driving: Lease | None, submitted: bool) -> Callable[[RunState], _Facts]:
    def facts(state: RunState) -> _Facts:
        return (
            status_of(state, driving, submitted=submitted),
            len(state.turns),
            halted_on(state, driving),
            waiting_on(state),
            stopped_on(state),
            in_flight_on(state, driving),
            state.usage,
        )

    return facts


async def list_sessions(journal: Journal, *, limit: int = 50) -> list[dict[str, Any]]:
    """The journal's sessions, newest first: each with its number of messages, its last run
    and that run's status (``runtime.sessions``)."""
    page = await journal.list_runs(prefix=SESSION_PREFIX, limit=max(1, limit))
    found: list[dict[str, Any]] = []
    for r in page.runs:
        name = r.run_id.removeprefix(SESSION_PREFIX)
        messages = await messages_of(journal.store, name)
        last = messages[-1].run_id if messages else None
        status = None
        if last is not None and (row := await journal.run_row(last)) is not None:
            status = (await row_of(journal, row)).status
        found.append(
            {"session": name, "messages": len(messages), "last_run": last, "status": status}
        )
    return found


async def session_runs(journal: Journal, name: str) -> list[dict[str, Any]]:
    """A session's runs in order (empty if there is no such session)."""
    runs: list[dict[str, Any]] = []
    for m in await messages_of(journal.store, name):
        row = await journal.run_row(m.run_id)
        told = await row_of(journal, row) if row is not None else None
        runs.append(
            {
                "k": m.k,
                "run_id": m.run_id,
                "status": told.status if told is not None else "never-started",
                "turns": told.turns if told is not None else 0,
                "usage": told.usage.to_json() if told is not None else None,
            }
        )
    return runs
