"""``resolve`` and ``cancel``: the operator's verbs, journaled with who said so."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from runtime.cli.base import EXIT_USAGE, Command, Failure, Invocation
from runtime.cli.logs import RESOLVED
from runtime.journal import Resolution
from runtime.jsontext import TooDeep, parse_json
from runtime.stops import halted_on
from runtime.terminal import printable
from runtime.tree import Kin, family

__all__ = ["COMMANDS"]


def operator(inv: Invocation) -> str | None:
    """Who is acting: ``--by``, else the login name."""
    if inv.args.by:
        return str(inv.args.by)
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


def _resolve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("call_id", metavar="CALL_ID")
    outcome = parser.add_mutually_exclusive_group(required=True)
    outcome.add_argument(
        "--succeeded",
        metavar="JSON",
        help="it acted; JSON is the result the model will see",
    )
    outcome.add_argument("--failed", metavar="TEXT", help="it did not succeed; the model sees TEXT")
    outcome.add_argument(
        "--not-executed",
        action="store_true",
        help="it never acted; the next resume attempts the call again",
    )
    parser.add_argument(
        "--attempt",
        metavar="N",
        type=_positive,
        help="the attempt you looked into (as `show` names it); needed once the call has been "
        "attempted more than once. Refused if the call has moved on to another attempt",
    )
    parser.add_argument("--by", metavar="NAME", help="who resolves it (default: your login name)")
    parser.add_argument("--evidence", metavar="TEXT", help="how you know (journaled with it)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="resolve a call that is still in flight (its drive's lease is live). Risky: if "
        "you say --not-executed and it is executing, the next attempt may act a second time. "
        "Journaled as forced",
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"an attempt is a positive integer, not {text!r}")
    return int(text)


async def _resolve(inv: Invocation) -> int:
    args = inv.args
    resolution = _resolution(args)
    async with inv.journal() as journal:
        recorded = await journal.resolve(
            args.run_id,
            args.call_id,
            resolution,
            attempt=args.attempt,
            by=operator(inv),
            evidence=args.evidence,
            force=args.force,
        )
        parent = (await family(journal, args.run_id)).parent
    outcome = RESOLVED[resolution.outcome]
    which = f" attempt {args.attempt}" if args.attempt is not None else ""
    if recorded:
        inv.out(f"resolved call {args.call_id}{which} of run {args.run_id}: {outcome}")
    else:
        inv.out(f"call {args.call_id}{which} of run {args.run_id} was already resolved {outcome}")
    inv.out(printable(_next_step(inv, args.run_id, parent)))
    return 0


def _next_step(inv: Invocation, run_id: str, parent: Kin | None) -> str:
    """What continues a resolved call's run: the run, or the parent run that drives it on (a
    child run's, a guarded LangGraph call's)."""
    if parent is None:
        return f"continue the run: {inv.command('resume', run_id)}"
    if parent.status == "missing":  # a LangGraph thread invoked by its own code, say
        return (
            f"continue what drives it, {parent.run_id} (not a run of this journal; for a "
            "LangGraph thread: invoke its graph again)"
        )
    return (
        f"continue its parent run, which drives it on: {inv.command('resume', parent.run_id)} "
        "(or let a worker)"
    )


def _resolution(args: argparse.Namespace) -> Resolution:
    if args.not_executed:
        return Resolution.not_executed()
    if args.failed is not None:
        if not args.failed.strip():
            raise Failure("--failed needs a text saying what went wrong", EXIT_USAGE)
        return Resolution.failed(args.failed)
    try:
        value: Any = parse_json(args.succeeded)
    except TooDeep as exc:
        raise Failure(f"--succeeded: {exc}, more than a journal keeps", EXIT_USAGE) from None
    except ValueError:
        raise Failure(
            f"--succeeded takes the call's result as JSON (for a text, quote it: '\"done\"'), "
            f"not {args.succeeded!r}",
            EXIT_USAGE,
        ) from None
    return Resolution.succeeded(value)


def _cancel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--reason", metavar="TEXT", help="why (journaled with the request)")
    parser.add_argument("--by", metavar="NAME", help="who cancels it (default: your login name)")


async def _cancel(inv: Invocation) -> int:
    args = inv.args
    async with inv.journal() as journal:
        new = await journal.cancel(args.run_id, reason=args.reason, by=operator(inv))
        halted = halted_on(await journal.require(args.run_id))
    if new:
        inv.out(
            f"cancel requested for run {args.run_id}: a driver starts no new turn or call; "
            f"`{inv.command('resume', args.run_id)}` ends it as cancelled"
        )
    else:
        inv.out(f"cancel was already requested for run {args.run_id}")
    for stop in halted:  # cancelling ends the run; it does not say whether the call acted
        resolve = inv.resolve_command(args.run_id, stop.call_id, stop.attempt)
        inv.out(
            printable(
                f"note: {stop.call_id} {stop.tool} was attempted and has no result, and stays "
                f"unknown: record what happened with `{resolve} --succeeded JSON | --failed "
                "TEXT | --not-executed`"
            )
        )
    return 0


COMMANDS = (
    Command(
        name="resolve",
        summary="say what happened to a halted call (succeeded, failed, or not executed)",
        description=(
            "Resolve a halted call: its side effect was attempted and its result never reached\n"
            "the journal. Find out what happened (the provider's records, the idempotency key),\n"
            "then say so; the first resolution wins and is journaled with --by and --evidence.\n"
            "A resolution judges one attempt of the call: name it with --attempt N once the\n"
            "call has been attempted more than once (`show` names the attempt it halted on).\n"
            "The same resolution again changes nothing; a different one, one for an attempt the\n"
            "call has moved on from, or a call that is not halted, is refused (exit 2), naming\n"
            "the call's current attempt. A call still in flight (the process that attempted it\n"
            "holds a live lease: it is running now) is refused (exit 6) unless --force.\n"
            "Then `resume` continues the run (its parent run, for a child run)."
        ),
        example=(
            '  {prog} resolve inv-7 c3 --succeeded \'{{"charge_id": "ch_1"}}\' '
            "--evidence 'ledger row ch_1'\n"
            "  {prog} resolve inv-7 c3 --not-executed --by alice --evidence 'no such charge'\n"
            "  {prog} resolve inv-7 c3 --attempt 2 --failed 'card declined'"
        ),
        arguments=_resolve_arguments,
        handler=_resolve,
    ),
    Command(
        name="cancel",
        summary="ask a run to stop: no new model turn or call starts",
        description=(
            "Request that RUN_ID stop. A driving process finishes the calls in flight and ends\n"
            "the run as cancelled; a run nobody drives is cancelled (exit 5) at its next resume.\n"
            "A run that already ended is refused (exit 2)."
        ),
        example="  {prog} cancel inv-7 --reason 'customer withdrew the request'",
        arguments=_cancel_arguments,
        handler=_cancel,
    ),
)
