"""``run`` and ``resume``: drive a run with its agent, progress on stderr, the answer on stdout."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

import structlog

from runtime import records as R
from runtime.cli.base import EXIT_BUSY, EXIT_USAGE, Command, Failure, Invocation, exit_code
from runtime.cli.specs import journaled_spec, open_agent
from runtime.errors import BudgetError, ConfigError, CorruptJournal, ModelError
from runtime.journal import Journal
from runtime.result import RunResult, RunStatus
from runtime.store import exists
from runtime.terminal import clip

__all__ = ["COMMANDS"]


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="the agent: an Agent, a function returning one, or an async context manager "
        "yielding one (the current directory is importable). Journaled with the run.",
    )
    parser.add_argument(
        "--run-id",
        metavar="ID",
        help="the run's id (default: a new one, named on stderr, even with -q)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument(
        "--session",
        metavar="NAME",
        help="the run is the next message of this session: its model sees the earlier ones; "
        f"exit {EXIT_BUSY} if the session's last message has not ended (see --wait)",
    )
    _wait_argument(parser)
    parser.add_argument("input", metavar="INPUT", help="the run's input text ('-' reads stdin)")


def _submit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        required=True,
        help="the agent a worker will drive it with (journaled with the run)",
    )
    parser.add_argument("--run-id", metavar="ID", help="the run's id (default: a new one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument(
        "--session",
        metavar="NAME",
        help=f"the run is the next message of this session (exit {EXIT_BUSY} if its last "
        "message has not ended)",
    )
    parser.add_argument(
        "--queue", metavar="QUEUE", help="workers start it within this queue's limits"
    )
    parser.add_argument(
        "--key", metavar="KEY", help="with --queue: its concurrency key (e.g. customer:ann)"
    )
    parser.add_argument(
        "--priority", type=int, default=0, metavar="N", help="with --queue: higher starts first"
    )
    parser.add_argument(
        "--dedup-key",
        metavar="KEY",
        help="with --queue: if a run of the queue with this key has not ended, submit nothing",
    )
    parser.add_argument(
        "--debounce",
        type=_seconds,
        metavar="SECONDS",
        help="with --dedup-key: start only once no submit of the key came for this long",
    )
    parser.add_argument("input", metavar="INPUT", help="the run's input text ('-' reads stdin)")


def _resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="drive it with this agent instead of the one journaled when the run started",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    _wait_argument(parser)


def _wait_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        nargs="?",
        type=_seconds,
        const=WAIT,
        metavar="SECONDS",
        help="if another live process drives the run, wait for its lease (default "
        f"{WAIT:g} s with no value); without --wait such a run is refused (exit 6)",
    )


WAIT = 60.0
"""How long ``--wait`` with no value waits for another owner's lease."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


async def _run(inv: Invocation) -> int:
    args = inv.args
    run_id = args.run_id or _new_run_id()
    text = sys.stdin.read().rstrip("\n") if args.input == "-" else args.input
    spec = args.agent or await _spec_of_existing_run(inv, run_id)
    # The agent first: a spec that does not import leaves no new journal file behind.
    async with open_agent(spec) as agent, inv.journal(create=True) as journal:
        inv.log.info("run_started", run_id=run_id, agent=spec)
        if not args.run_id and getattr(args, "quiet", False):
            # -q hides run_started; a made-up id must still reach the operator, or the run is
            # lost to them.
            print(f"bide: run id {run_id}", file=sys.stderr)
        drive = agent.run(
            run_id,
            text,
            journal=journal,
            spec=journaled_spec(spec),
            wait=args.wait,
            session=args.session,
        )
        return await _drive(inv, run_id, spec, drive)


def _new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


async def _submit(inv: Invocation) -> int:
    args = inv.args
    run_id = args.run_id or _new_run_id()
    text = sys.stdin.read().rstrip("\n") if args.input == "-" else args.input
    async with open_agent(args.agent) as agent, inv.journal(create=True) as journal:
        result = await agent.submit(
            run_id,
            text,
            journal=journal,
            spec=journaled_spec(args.agent),
            session=args.session,
            queue=args.queue,
            concurrency_key=args.key,
            priority=args.priority,
            dedup_key=args.dedup_key,
            debounce=args.debounce,
        )
    if args.json:
        inv.out_json(result.to_json())
    elif result.run_id != run_id:
        inv.out(
            f"run {result.run_id} holds dedup key {args.dedup_key!r} ({result.status.value}); "
            "nothing was submitted"
        )
    elif result.status is RunStatus.SUBMITTED:
        inv.out(f"submitted run {run_id}: a worker drives it (`{inv.command('worker')}`)")
    else:
        inv.out(f"run {run_id} exists already ({result.status.value}); nothing was submitted")
    return 0


async def _spec_of_existing_run(inv: Invocation, run_id: str) -> str:
    spec = None
    if exists(inv.db):
        async with inv.journal() as journal:
            spec = await _journaled_spec(journal, run_id)
    if spec is None:
        raise Failure("run needs --agent MODULE:ATTR (the agent to drive)", EXIT_USAGE)
    return spec


async def _resume(inv: Invocation) -> int:
    run_id = inv.args.run_id
    async with inv.journal() as journal:
        # The start record alone says how to drive it: the drive itself replays the run.
        start = await _start_of(journal, run_id)
        if start is None:
            # Killed after its header and before its start record: nothing of it ever ran.
            raise ConfigError(
                f"run {run_id!r} never started (its process stopped before the input was "
                "journaled); start it again with "
                f"`{inv.command('run', '--run-id', run_id, '--agent', 'SPEC', 'INPUT')}`",
                run_id=run_id,
            )
        spec = inv.args.agent or _spec_in(start)
        if spec is None:
            raise ConfigError(
                f"run {run_id!r} was started without an agent spec; name its agent with "
                "--agent MODULE:ATTR",
                run_id=run_id,
            )
        async with open_agent(spec) as agent:
            started_by = start.get("agent")
            if inv.args.agent and isinstance(started_by, str) and started_by != agent.name:
                # Allowed (a fixed build, a new budget), but never silently: its recorded calls
                # keep the Safety they ran under whatever this agent says now.
                inv.log.warning(
                    "agent_overridden", run_id=run_id, started_by=started_by, agent=agent.name
                )
            # The run's own spec, or the operator's --agent (warned above): either drives it.
            drive = agent.resume(run_id, journal=journal, wait=inv.args.wait, override_agent=True)
            return await _drive(inv, run_id, spec, drive)


async def journaled_spec_of(journal: Journal, run_id: str) -> str | None:
    """The agent spec the run journaled when it started, if any."""
    return await _journaled_spec(journal, run_id)


async def _journaled_spec(journal: Journal, run_id: str) -> str | None:
    if not await journal.store.check_run(run_id):
        return None
    return _spec_in(await _start_record(journal, run_id))


async def _start_of(journal: Journal, run_id: str) -> Mapping[str, Any] | None:
    """The run's start record's payload (``ConfigError`` if there is no such run)."""
    if not await journal.store.check_run(run_id):
        raise ConfigError(f"no run {run_id!r} in {journal.path}", run_id=run_id)
    return await _start_record(journal, run_id)


async def _start_record(journal: Journal, run_id: str) -> Mapping[str, Any] | None:
    start = await journal.store.get(run_id, R.START)
    if start is None:
        return None
    if not isinstance(start.payload, Mapping):
        raise CorruptJournal(
            f"run {run_id!r}: its start record is not an object", run_id=run_id, key=R.START
        )
    return start.payload


def _spec_in(start: Mapping[str, Any] | None) -> str | None:
    spec = (start or {}).get("spec")
    return spec if isinstance(spec, str) and spec else None


async def _drive(inv: Invocation, run_id: str, spec: str, drive: Awaitable[RunResult[Any]]) -> int:
    with structlog.contextvars.bound_contextvars(run_id=run_id):
        try:
            result = await drive
        except BudgetError as exc:
            raise Failure(
                f"{exc}. Nothing is lost: raise max_turns in {spec}, then "
                f"`{inv.command('resume', run_id)}`"
            ) from exc
        except ModelError as exc:
            if not exc.retryable:
                raise
            raise Failure(
                f"the model is unavailable after retries ({exc}). Nothing is lost: continue "
                f"later with `{inv.command('resume', run_id)}`"
            ) from exc
        _report(inv, result)
    return exit_code(result.status)


def _report(inv: Invocation, result: RunResult[Any]) -> None:
    """The answer on stdout; what the run stopped on, and what to do next, on stderr."""
    log, run_id = inv.log, result.run_id
    if inv.args.json:
        inv.out_json(result.to_json())
    elif result.status is RunStatus.COMPLETED and result.output is not None:
        output = result.to_json()["output"]  # a typed output as its JSON, the text as it is
        inv.out(output if isinstance(output, str) else json.dumps(output, ensure_ascii=False))
    for halt in result.halts:
        resolve = inv.resolve_command(run_id, halt.call_id, halt.attempt)
        log.warning(
            "run_halted",
            call_id=halt.call_id,
            tool=halt.tool,
            next=f"`{resolve} --succeeded JSON | --failed TEXT | --not-executed`, then "
            f"`{inv.command('resume', run_id)}`",
        )
    for wait in result.waiting:
        what = f"approval of {wait.call_id} {wait.tool}"
        if wait.kind == "input":
            what = f"an answer for {wait.call_id} {wait.tool}: {clip(wait.prompt)}"
        elif wait.kind == "timer":
            what = f"{wait.call_id} {wait.tool}'s timer, due {wait.at} (a worker drives it then)"
        elif wait.kind == "signal":
            what = (
                f"a signal {wait.name} for {wait.call_id} {wait.tool} "
                f"(`{inv.command('signal', run_id)} {wait.name} --value JSON`)"
            )
        log.warning("waiting_for", what=what)
    if result.status is RunStatus.FAILED:
        log.error("run_failed", error=result.error)
    elif result.status is RunStatus.CANCELLED:
        log.warning("run_cancelled")


COMMANDS = (
    Command(
        name="run",
        summary="start a run (or drive an existing one) with an agent",
        description=(
            "Start the run with INPUT and drive it until it completes, fails, waits or halts.\n"
            "The agent spec is journaled, so `resume` needs no --agent. An existing run id is\n"
            "driven on from its journal (its input must be the same). Progress goes to stderr,\n"
            "the final answer to stdout. Exit: 0 completed, 1 failed, 3 waiting, 4 halted,\n"
            "5 cancelled, 6 another live process drives the run (see --wait)."
        ),
        example=(
            '  {prog} run --agent examples.payments:make_agent --run-id inv-7 "Charge ann 12.00"\n'
            "  echo 'Summarise the incident' | {prog} run --agent myagents:triage --json -"
        ),
        arguments=_run_arguments,
        handler=_run,
    ),
    Command(
        name="resume",
        summary="drive an existing run on from its journal (after a crash, a resolve, ...)",
        description=(
            "Drive RUN_ID again: recorded turns and results are replayed, never redone; a side\n"
            "effect attempted without a recorded result halts the run (exit 4) until `resolve`\n"
            "says what happened. Uses the agent journaled at start unless --agent is given.\n"
            "A run another live process drives is refused (exit 6, naming it) unless --wait;\n"
            "a process that crashed on this host holds nothing, so resume right after a crash\n"
            "drives at once."
        ),
        example="  {prog} resume inv-7\n  {prog} resume inv-7 --json --db /var/lib/bide/bide.db",
        arguments=_resume_arguments,
        handler=_resume,
    ),
    Command(
        name="submit",
        summary="start a run durably without driving it: a worker drives it",
        description=(
            "Journal the run's start (its input and agent spec) and return at once: the run is\n"
            "`submitted` until a worker (or `resume`) drives it. An existing run id is left as\n"
            "it is. Exit 0."
        ),
        example='  {prog} submit --agent examples.payments:make_agent --run-id inv-8 "Charge bo 5"',
        arguments=_submit_arguments,
        handler=_submit,
    ),
)
