"""``verify``: check runs' records for what should never be there (an effect that may have acted
twice, records after a run's end), as an older bide could leave them."""

from __future__ import annotations

import argparse

from runtime.cli.base import EXIT_ERROR, EXIT_OK, Command, Invocation
from runtime.errors import ConfigError, FormatError, ProtocolError
from runtime.terminal import printable

__all__ = ["COMMANDS"]

_UNREADABLE = (ConfigError, FormatError, ProtocolError, LookupError, TypeError, ValueError)
"""What reading one run can raise that concerns that run only: no such run, a record that
cannot be decoded or folded, a format this bide does not know."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", metavar="RUN_ID", nargs="*", help="runs to check (default: all)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")


async def _verify(inv: Invocation) -> int:
    findings: dict[str, list[str]] = {}
    checked = 0
    async with inv.journal(migrate=False) as journal:
        run_ids = list(inv.args.run_ids)
        if not run_ids:
            cursor = None
            while True:
                page = await journal.list_runs(limit=500, before=cursor)
                run_ids += [row.run_id for row in page.runs]
                cursor = page.next_cursor
                if cursor is None:
                    break
        for run_id in run_ids:
            checked += 1
            try:
                state = await journal.require(run_id)
                found = state.anomalies()
            except _UNREADABLE as exc:
                # One run that cannot be read is a finding of its own; the rest are checked.
                found = [f"cannot be read: {' '.join(str(exc).split())}"]
            if found:
                findings[run_id] = found
    if inv.args.json:
        inv.out_json({"checked": checked, "findings": findings})
    else:
        for run_id, found in findings.items():
            for line in found:
                inv.out(printable(f"run {run_id} {line}"))
        bad = len(findings)
        inv.out(f"{checked} run{'s' if checked != 1 else ''} checked, {bad} with findings")
    return EXIT_ERROR if findings else EXIT_OK


COMMANDS = (
    Command(
        name="verify",
        summary="check runs for an effect that may have acted twice, or records after the end",
        description=(
            "Read every run (or the RUN_IDs given) and report what its records should never\n"
            "hold: a side effect with two attempts that have results ('may have acted twice'),\n"
            "or records appended after the run's end. A journal written by this bide has none;\n"
            "an older bide could leave them. A run that cannot be read is reported as such,\n"
            "and the others are still checked. Exit 0 when nothing is found, 1 otherwise."
        ),
        example="  {prog} verify\n  {prog} verify inv-7 --json",
        arguments=_arguments,
        handler=_verify,
    ),
)
