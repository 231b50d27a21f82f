"""``list`` and ``show``: what the journal holds, as tables and timelines. Neither writes."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from runtime.cli.base import Command, Invocation
from runtime.journal import Journal, RunRow
from runtime.result import RunStatus
from runtime.timeline import Stop, halted_on, printable, render, timeline, waiting_on

__all__ = ["COMMANDS"]

_LIVE = ("running", "waiting", "halted")
"""Statuses the index may hold stale (a killed driver writes nothing): these are re-derived."""


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
        }


async def _row(journal: Journal, r: RunRow) -> Row:
    row = Row(r.run_id, r.status, r.agent, r.turns, r.created_ms, r.updated_ms)
    if r.status not in _LIVE:
        return row  # an end marker or a cancel request wrote this status with its record
    state = await journal.state(r.run_id)
    if state is None:
        return row
    return Row(
        r.run_id,
        state.status(),
        r.agent,
        len(state.turns),
        r.created_ms,
        r.updated_ms,
        halted_on(state),
        waiting_on(state),
    )


async def _rows(
    journal: Journal, *, status: str | None, prefix: str | None, limit: int
) -> list[Row]:
    if status not in _LIVE:
        page = await journal.list_runs(status=status, prefix=prefix, limit=limit)
        return [await _row(journal, r) for r in page.runs]
    # A run the index calls "running" may really be halted (its driver was killed mid-call):
    # look through every live index status, keep the runs whose records say `status`.
    found: list[Row] = []
    for listed in _LIVE:
        matches: list[Row] = []
        cursor: str | None = None
        while len(matches) < limit:
            page = await journal.list_runs(status=listed, prefix=prefix, limit=limit, before=cursor)
            for r in page.runs:
                row = await _row(journal, r)
                if row.status == status:
                    matches.append(row)
            cursor = page.next_cursor
            if cursor is None:
                break
        found.extend(matches[:limit])
    found.sort(key=lambda row: (row.created_ms, row.run_id), reverse=True)
    return found[:limit]


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status", choices=[s.value for s in RunStatus], help="only runs in this status"
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
        rows = await _rows(journal, status=args.status, prefix=args.prefix, limit=args.limit)
    if args.json:
        inv.out_json({"runs": [row.to_json() for row in rows]})
        return 0
    table = [("RUN ID", "STATUS", "AGENT", "TURNS", "UPDATED", "STOPPED ON")]
    for row in rows:
        stops = ", ".join(s.brief() for s in (*row.halted, *row.waiting))
        table.append(
            (
                printable(row.run_id),
                row.status,
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
    return 0


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--json", action="store_true", help="print the timeline as JSON on stdout")


async def _show(inv: Invocation) -> int:
    run_id = inv.args.run_id
    async with inv.journal(migrate=False) as journal:
        state = await journal.require(run_id)
    told = timeline(state)
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
    if told.status == "running" or (told.status == "cancelled" and state.end is None):
        inv.out(printable(f"  resume it: {inv.command('resume', run_id)}"))
    return 0


COMMANDS = (
    Command(
        name="list",
        summary="list runs, newest first, with their status and what they stopped on",
        description=(
            "List the journal's runs, newest first: id, status, agent, turns, last update, and\n"
            "the calls a waiting or halted run stopped on. Statuses are derived from the records\n"
            "(a run whose process was killed mid-call shows as halted, not running)."
        ),
        example="  {prog} list\n  {prog} list --status halted --limit 10 --json",
        arguments=_list_arguments,
        handler=_list,
    ),
    Command(
        name="show",
        summary="show a run's timeline: turns, calls, attempts, results, halts, resolutions",
        description=(
            "Print RUN_ID's timeline from its journal, record by record: model turns, each tool\n"
            "call with the Safety it runs under, attempt markers, results, halts, resolutions\n"
            "(who, with what evidence), cancel and end; then where the run stands."
        ),
        example="  {prog} show inv-7\n  {prog} show inv-7 --json",
        arguments=_show_arguments,
        handler=_show,
    ),
)
