"""``sessions``: the journal's sessions, or one session's runs in order (``runtime.sessions``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from runtime.cli.base import Command, Invocation
from runtime.errors import ConfigError
from runtime.runs import row_of
from runtime.sessions import SESSION_PREFIX, journal_id, messages_of
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
            page = await journal.list_runs(prefix=SESSION_PREFIX, limit=max(1, args.limit))
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
        journal_id(args.name)  # a bad name is a usage error
        messages = await messages_of(journal.store, args.name)
        if not messages:
            raise ConfigError(f"no session {args.name!r} in {journal.path}")
        runs: list[dict[str, Any]] = []
        for m in messages:
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
    if args.json:
        inv.out_json({"session": args.name, "runs": runs})
        return 0
    table = [("#", "RUN ID", "STATUS", "TURNS")]
    for run in runs:
        table.append((str(run["k"]), printable(run["run_id"]), run["status"], str(run["turns"])))
    _print(inv, table, empty="")
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
