"""``list`` and ``show``: what the journal holds, as tables and timelines. Neither writes."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.cli.base import EXIT_HALTED, EXIT_USAGE, Command, Failure, Invocation
from runtime.errors import ConfigError, FormatError, ProtocolError
from runtime.journal import Journal, RunRow
from runtime.ownership import Lease, is_alive
from runtime.records import Record
from runtime.result import RunStatus
from runtime.state import RunState
from runtime.stops import (
    NEVER_STARTED,
    Stop,
    halted_on,
    in_flight_on,
    status_of,
    stopped_on,
    waiting_on,
)
from runtime.terminal import printable
from runtime.timeline import UNREADABLE, Unreadable, read, render, timeline

__all__ = ["COMMANDS"]

ORPHANED = "orphaned"
"""The status of a run whose last drive journaled a stop short of an end (``RunState.status``)."""

_ENDED = ("completed", "failed")
"""Index statuses written with the end record, never overwritten: the index can be trusted."""
_OPEN = ("running", "submitted", "waiting", "halted", "cancelled", ORPHANED)
"""Index statuses that may be stale (a killed driver writes nothing; a driver that halts after a
cancel request rewrites it): runs listed under these are re-derived from their records."""


@dataclass(frozen=True, slots=True)
class Row:
    """One run as ``list`` shows it: its status derived from its records, and what it waits on."""

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
    lease: Lease | None = None
    driven: bool = False

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
        }


async def _records(journal: Journal, run_id: str) -> list[Record] | Unreadable | None:
    """The run's records; ``None`` if there is no such run; ``Unreadable`` if one of them cannot
    be decoded (or the run is written in a format this bide does not know)."""
    try:
        if not await journal.store.check_run(run_id):
            return None
        return await journal.store.load(run_id)
    except (ProtocolError, FormatError) as exc:
        return Unreadable(run_id, str(exc))


_Facts = tuple[
    str, int, tuple[Stop, ...], tuple[Stop, ...], Mapping[str, Any] | None, tuple[Stop, ...]
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
        )

    return facts


async def _row(journal: Journal, r: RunRow) -> Row:
    # Every run is read, ended ones too: a cancelled run may keep a call that may have acted.
    records = await _records(journal, r.run_id)
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
    status, turns, halted, waiting, stopped, in_flight = facts
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
    )


def _keeps(row: Row, *, status: str | None, unresolved: bool) -> bool:
    if row.unreadable is not None:
        return True  # its status is unknown: it may be the run the filter looks for
    if status is not None and row.status != status:
        return False
    return not unresolved or bool(row.halted)


async def _rows(
    journal: Journal, *, status: str | None, unresolved: bool, prefix: str | None, limit: int
) -> list[Row]:
    if status is None and not unresolved:
        page = await journal.list_runs(prefix=prefix, limit=limit)
        return [await _row(journal, r) for r in page.runs]
    # A run the index calls "running" may really be halted (its driver was killed mid-call), an
    # ended run may keep an unresolved call: read the runs the index cannot rule out, keep the
    # ones whose records match.
    listed: tuple[str | None, ...]
    if status in _ENDED:
        listed = (status,)
    elif unresolved or status == UNREADABLE:
        listed = (None,)
    else:
        listed = _OPEN
    found: list[Row] = []
    for index_status in listed:
        matches: list[Row] = []
        cursor: str | None = None
        while len(matches) < limit:
            page = await journal.list_runs(
                status=index_status, prefix=prefix, limit=limit, before=cursor
            )
            for r in page.runs:
                row = await _row(journal, r)
                if _keeps(row, status=status, unresolved=unresolved):
                    matches.append(row)
            cursor = page.next_cursor
            if cursor is None:
                break
        found.extend(matches[:limit])
    found.sort(key=lambda row: (row.created_ms, row.run_id), reverse=True)
    return found[:limit]


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status",
        choices=[*(s.value for s in RunStatus), ORPHANED, NEVER_STARTED, UNREADABLE],
        help="only runs in this status (a run that cannot be read is kept under every status)",
    )
    parser.add_argument(
        "--unresolved",
        action="store_true",
        help="only runs with a side effect attempted and no recorded result (it may have "
        "acted), whatever their status; reads every run",
    )
    parser.add_argument(
        "--fail-if-any",
        action="store_true",
        help=f"exit {EXIT_HALTED} if any run is listed (for alerting: "
        "`list --unresolved --fail-if-any`)",
    )
    parser.add_argument("--prefix", metavar="TEXT", help="only runs whose id starts with TEXT")
    parser.add_argument(
        "--limit", type=_positive, default=50, metavar="N", help="at most N runs (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="print the runs as JSON on stdout")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


async def _list(inv: Invocation) -> int:
    args = inv.args
    async with inv.journal(migrate=False) as journal:
        rows = await _rows(
            journal,
            status=args.status,
            unresolved=args.unresolved,
            prefix=args.prefix,
            limit=args.limit,
        )
    code = EXIT_HALTED if args.fail_if_any and rows else 0
    if args.json:
        inv.out_json({"runs": [row.to_json() for row in rows]})
        return code
    table = [("RUN ID", "STATUS", "AGENT", "TURNS", "UPDATED", "STOPPED ON")]
    for row in rows:
        stops = ", ".join(s.brief() for s in (*row.in_flight, *row.halted, *row.waiting))
        if row.driven and row.lease is not None:
            stops = ", ".join(filter(None, (f"by {row.lease.owner.describe()}", stops)))
        if row.stopped is not None:
            stops = ", ".join(filter(None, (stops, f"stopped: {row.stopped.get('reason')}")))
        if row.unreadable is not None:
            stops = row.unreadable
        table.append(
            (
                printable(row.run_id),
                printable(row.status),
                printable(row.agent or ""),
                str(row.turns),
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.updated_ms / 1000)),
                printable(stops if len(stops) <= 60 else stops[:57] + "..."),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        inv.out("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    if not rows:
        inv.out("(no runs)")
    return code


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--json", action="store_true", help="print the timeline as JSON on stdout")


async def _show(inv: Invocation) -> int:
    run_id = inv.args.run_id
    async with inv.journal(migrate=False) as journal:
        records = await _records(journal, run_id)
        if records is None:
            raise ConfigError(f"no run {run_id!r} in {journal.path}", run_id=run_id)
        row = await journal.run_row(run_id)
    lease = row.lease if row is not None else None
    tell = functools.partial(
        timeline,
        lease=lease,
        driven=is_alive(lease),
        submitted=row is not None and row.status == "submitted",
    )
    told = read(run_id, records, tell) if isinstance(records, list) else records
    if isinstance(told, Unreadable):
        # From the journal's own error type, so `--json` names it (the record broke its format).
        message = printable(f"{told.reason}; the journal is damaged there")
        raise Failure(message, EXIT_USAGE) from ProtocolError(message, run_id=run_id)
    if inv.args.json:
        inv.out_json(told.to_json())
        return 0
    for line in render(told):
        inv.out(line)
    for stop in told.halted:
        resolve = inv.command("resolve", run_id, stop.call_id)
        inv.out(
            printable(f"  resolve it: {resolve} --succeeded JSON | --failed TEXT | --not-executed")
        )
    ended = any(e.kind == "end" for e in told.events)
    started = any(e.kind == "start" for e in told.events)
    if not started and not ended:
        again = inv.command("run", "--run-id", run_id, "--agent", "SPEC", "INPUT")
        inv.out(printable(f"  start it again: {again}"))
    elif told.status in ("submitted", ORPHANED) or (
        told.status == "cancelled" and not ended and not told.driven
    ):
        inv.out(printable(f"  resume it: {inv.command('resume', run_id)}"))
    return 0


COMMANDS = (
    Command(
        name="list",
        summary="list runs, newest first, with their status and what they stopped on",
        description=(
            "List the journal's runs, newest first: id, status, agent, turns, last update, and\n"
            "what each stopped on: a call that may have acted (whatever the run's status: a\n"
            "cancelled run keeps it until it is resolved), an approval or a question. Statuses\n"
            "are derived from the records (a run whose process was killed mid-call shows as\n"
            "halted, not running); a run one of whose records cannot be read shows as\n"
            "unreadable and the listing goes on. With --fail-if-any, exit 4 if any run is listed."
        ),
        example=(
            "  {prog} list\n  {prog} list --status halted --limit 10 --json\n"
            "  {prog} list --unresolved --fail-if-any   # for cron: exit 4 if a call may have acted"
        ),
        arguments=_list_arguments,
        handler=_list,
    ),
    Command(
        name="show",
        summary="show a run's timeline: turns, calls, attempts, results, halts, resolutions",
        description=(
            "Print RUN_ID's timeline from its journal, record by record: model turns, each tool\n"
            "call with the Safety it runs under, attempt markers, results, halts, resolutions\n"
            "(who, with what evidence), cancel and end; then where the run stands. A run with a\n"
            "record that cannot be read: one line naming the record, exit 2."
        ),
        example="  {prog} show inv-7\n  {prog} show inv-7 --json",
        arguments=_show_arguments,
        handler=_show,
    ),
)
