"""``list`` and ``show``: what the journal holds, as tables and timelines. Neither writes."""

from __future__ import annotations

import argparse
import functools
import time
from typing import Any

from runtime.cli import follow
from runtime.cli.base import EXIT_HALTED, EXIT_USAGE, Command, Failure, Invocation
from runtime.errors import ConfigError, ProtocolError
from runtime.ownership import is_alive
from runtime.result import RunStatus
from runtime.runs import ORPHANED, list_page, records_of
from runtime.sessions import SESSION_PREFIX
from runtime.stops import (
    NEVER_STARTED,
)
from runtime.terminal import printable
from runtime.timeline import UNREADABLE, Unreadable, read, render, timeline
from runtime.tree import Family, Kin, family

__all__ = ["COMMANDS"]


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
        "--tokens-over",
        type=_positive,
        metavar="N",
        help="only runs whose model turns consumed more than N tokens (input and output)",
    )
    parser.add_argument(
        "--roots",
        action="store_true",
        help="hide child runs (an agent's calls of another agent): only runs no run started",
    )
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
        page = await list_page(
            journal,
            status=args.status,
            unresolved=args.unresolved,
            prefix=args.prefix,
            limit=args.limit,
            tokens_over=args.tokens_over,
            roots=args.roots,
        )
    rows = page.rows
    code = EXIT_HALTED if args.fail_if_any and rows else 0
    if args.json:
        inv.out_json({"runs": [row.to_json() for row in rows]})
        return code
    table = [("RUN ID", "STATUS", "AGENT", "TURNS", "TOKENS", "UPDATED", "STOPPED ON")]
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
                str(row.usage.total_tokens),
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
    follow.arguments(parser)


async def _show(inv: Invocation) -> int:
    run_id = inv.args.run_id
    if run_id.startswith(SESSION_PREFIX):
        name = run_id.removeprefix(SESSION_PREFIX)
        raise ConfigError(
            f"{run_id!r} is the journal of session {name!r}, not a run: "
            f"`{inv.command('sessions', name)}` lists its runs"
        )
    if inv.args.follow:
        return await follow.show(inv)
    async with inv.journal(migrate=False) as journal:
        records = await records_of(journal, run_id)
        if records is None:
            raise ConfigError(f"no run {run_id!r} in {journal.path}", run_id=run_id)
        row = await journal.run_row(run_id)
        kin = await family(journal, run_id)
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
        inv.out_json({**told.to_json(), **_family_json(kin)})
        return 0
    for line in render(told):
        inv.out(line)
    for line in _family_lines(kin):
        inv.out(printable(line))
    for stop in told.halted:
        resolve = inv.resolve_command(run_id, stop.call_id, stop.attempt)
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


def _family_json(kin: Family) -> dict[str, Any]:
    def one(k: Kin) -> dict[str, str]:
        return {"run_id": k.run_id, "call_id": k.call_id, "status": k.status}

    return {
        "parent": one(kin.parent) if kin.parent is not None else None,
        "children": [one(k) for k in kin.children],
    }


def _family_lines(kin: Family) -> list[str]:
    """The run's parent and children (``runtime.children``), if it has any."""
    lines = []
    if kin.parent is not None:
        p = kin.parent
        lines.append(f"  child of {p.run_id} (its call {p.call_id}), which is {p.status}")
    if kin.children:
        lines.append("  children:")
        lines += [f"    {k.run_id}  {k.status}  (call {k.call_id})" for k in kin.children]
        if kin.more:
            lines.append("    (more not shown)")
    return lines


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
            "record that cannot be read: one line naming the record, exit 2. With --follow, print\n"
            "the run's events one line each (--json: one JSON object each) as they are journaled,\n"
            "from any process, until the run ends; --after CURSOR resumes after an event."
        ),
        example=(
            "  {prog} show inv-7\n  {prog} show inv-7 --json\n  {prog} show --follow inv-7\n"
            "  {prog} show --follow inv-7 --after 41 --json"
        ),
        arguments=_show_arguments,
        handler=_show,
    ),
)
