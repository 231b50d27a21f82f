"""``reconcile``: run the declared reconcilers of halted calls now, and say what each concluded."""

from __future__ import annotations

import argparse

from runtime.cli.base import EXIT_HALTED, Command, Invocation
from runtime.cli.drive import journaled_spec_of
from runtime.cli.specs import open_agent
from runtime.errors import ConfigError
from runtime.journal import Journal
from runtime.terminal import printable

__all__ = ["COMMANDS"]


def _reconcile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_id", metavar="RUN_ID", nargs="?", help="one run (default: every halted run)"
    )
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="the agent whose tools declare the reconcilers (default: the one each run journaled)",
    )


async def _reconcile(inv: Invocation) -> int:
    args = inv.args
    async with inv.journal() as journal:
        if args.run_id is not None:
            await journal.require(args.run_id)
            run_ids = [args.run_id]
        else:
            run_ids = await _unresolved(journal)
        halted = 0
        for run_id in run_ids:
            halted += await _one(inv, journal, run_id)
    if not run_ids:
        inv.out("(no run has a call attempted without a result)")
    return EXIT_HALTED if halted else 0


_MAY_HOLD = ("halted", "running", "orphaned", "cancelled")
"""Index statuses of runs that may hold a call attempted without a result (a killed drive
leaves "running"; a cancelled run keeps its unresolved calls)."""


async def _unresolved(journal: Journal) -> list[str]:
    found: list[str] = []
    for status in _MAY_HOLD:
        cursor = None
        while True:
            page = await journal.list_runs(status=status, limit=200, before=cursor)
            for row in page.runs:
                state = await journal.state(row.run_id)
                if state is not None and state.unresolved_calls():
                    found.append(row.run_id)
            cursor = page.next_cursor
            if cursor is None:
                break
    return found


async def _one(inv: Invocation, journal: Journal, run_id: str) -> int:
    """Reconcile one run; print a line per call; how many calls stay unresolved."""
    spec = inv.args.agent or await journaled_spec_of(journal, run_id)
    if spec is None:
        raise ConfigError(
            f"run {run_id!r} journaled no agent spec: name it with --agent MODULE:ATTR",
            run_id=run_id,
        )
    from runtime.reconcile import settle_run  # for this command alone

    async with open_agent(spec) as agent:
        verdicts = await settle_run(journal, agent.tools, run_id, now=True)
    told = {call.call.id for call, _ in verdicts}
    for call, verdict in verdicts:
        if verdict.outcome == "value":
            done = "resolved: succeeded"
        elif verdict.outcome == "not_executed":
            done = "resolved: not executed"
        else:
            done = "still halted"
        inv.out(printable(f"{run_id} {call.call.id} {call.call.name}: {verdict.brief()}: {done}"))
    state = await journal.require(run_id)
    left = state.unresolved_calls()
    for call in left:
        if call.call.id not in told:
            inv.out(
                printable(
                    f"{run_id} {call.call.id} {call.call.name}: no reconciler; resolve it by hand"
                )
            )
    if verdicts and not left:
        inv.out(f"continue the run: {inv.command('resume', run_id)} (or let a worker)")
    return len(left)


COMMANDS = (
    Command(
        name="reconcile",
        summary="run the declared reconcilers of halted calls now",
        description=(
            "For RUN_ID, or every run with a call attempted and no result: ask the call's\n"
            "reconciler (declared with its tool, `@tool(reconcile=...)`) whether the effect\n"
            "happened, and journal what it concluded as the call's resolution, naming the\n"
            "reconciler and its evidence. A run a live process drives is left to it. Found\n"
            "settles at once; absent only once the attempt's owner is gone and its settle time\n"
            "has passed; unknown leaves it halted. A person's earlier resolution stands.\n"
            "Exit 0 if nothing is left unresolved, 4 if some call still is."
        ),
        example="  {prog} reconcile\n  {prog} reconcile inv-7",
        arguments=_reconcile_arguments,
        handler=_reconcile,
    ),
)
