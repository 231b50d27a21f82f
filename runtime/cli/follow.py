"""``show --follow``: a run's events printed as they are journaled, from any process."""

from __future__ import annotations

import argparse
import json

from runtime.cli.base import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, Invocation
from runtime.events.hub import IDLE
from runtime.events.text import line
from runtime.events.types import Ended
from runtime.terminal import printable

__all__ = ["arguments", "show"]

_EXIT = {"completed": EXIT_OK, "failed": EXIT_ERROR, "cancelled": EXIT_CANCELLED}


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--follow",
        action="store_true",
        help="print the run's events as they are journaled (one line each; --json: one JSON "
        "object each) until the run ends",
    )
    parser.add_argument(
        "--after",
        metavar="CURSOR",
        default="0",
        help="with --follow: only the events after this one (its cursor, as printed)",
    )
    parser.add_argument(
        "--idle",
        type=_seconds,
        default=IDLE,
        metavar="SECONDS",
        help=f"with --follow: stop after SECONDS without an event (default {IDLE:g}); follow "
        "again with --after the last cursor",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


async def show(inv: Invocation) -> int:
    """Print RUN_ID's events after --after until its end (exit by its status: 0 completed, 1
    failed, 5 cancelled), or until --idle seconds pass without one (exit 0)."""
    args = inv.args
    last = None
    async with inv.journal(migrate=False) as journal:
        async for event in journal.events(args.run_id, after=args.after, idle=args.idle):
            if args.json:
                inv.out(json.dumps(event.to_json(), ensure_ascii=False, default=str))
            else:
                inv.out(printable(line(event)))
            inv.stdout.flush()
            if event.cursor is not None:
                last = event.cursor
            if isinstance(event, Ended):
                return _EXIT.get(event.status, EXIT_ERROR)
    if not args.json:
        again = inv.command("show", "--follow", args.run_id, "--after", last or args.after)
        inv.out(printable(f"(no event for {args.idle:g} s; to carry on: {again})"))
    return EXIT_OK
