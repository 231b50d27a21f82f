"""``sessions``: the journal's sessions, or one session's runs in order (``runtime.sessions``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from runtime.cli.base import Command, Invocation
from runtime.errors import ConfigError
from runtime.runs import list_sessions, session_runs
from runtime.sessions import journal_id
from runtime.terminal import printable

__all__ = ["COMMANDS"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", nargs="?", help="list this session's runs")
    parser.add_argument(
        "--limit", type=int, default=50, metavar="N", help="at most N sessions (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


async def _sessions(inv: Invocation) -> int:
    args = inv.args
    async with inv.journal(migrate=False) as journal:
        if args.name is None:
            found = await list_sessions(journal, limit=args.limit)
        else:
            journal_id(args.name)  # a bad name is a usage error
            runs = await session_runs(journal, args.name)
            if not runs:
                raise ConfigError(f"no session {args.name!r} in {journal.path}")
    if args.name is None:
        if args.json:
            inv.out_json({"sessions": found})
            return 0
        table = [("SESSION", "MESSAGES", "LAST RUN", "STATUS")]
        for s in found:
            table.append(
                (
                    printable(s["session"]),
                    str(s["messages"]),
                    printable(s["last_run"] or ""),
                    s["status"] or "",
                )
            )
        _print(inv, table, empty="(no sessions)")
        return 0
    if args.json:
        inv.out_json({"session": args.name, "runs": runs})
        return 0
    rows = [("#", "RUN ID", "STATUS", "TURNS")]
    for run in runs:
        rows.append((str(run["k"]), printable(run["run_id"]), run["status"], str(run["turns"])))
    _print(inv, rows, empty="")
    return 0


def _print(inv: Invocation, table: Sequence[tuple[str, ...]], *, empty: str) -> None:
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        inv.out("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    if len(table) == 1 and empty:
        inv.out(empty)


COMMANDS = (
    Command(
        name="sessions",
        summary="list sessions, or one session's runs in order",
        description=(
            "Without NAME, list the journal's sessions: how many messages each has, its last\n"
            "run and that run's status (a session runs one message at a time: a last run that\n"
            "is not ended, or cancelled, holds it). With NAME, the session's runs in order."
        ),
        example="  {prog} sessions\n  {prog} sessions ticket-42 --json",
        arguments=_arguments,
        handler=_sessions,
    ),
)
