"""``schedule`` and ``queue``: schedules that start runs, and the limits of queues."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from runtime.cli.base import EXIT_USAGE, Command, Failure, Invocation
from runtime.cli.drive import _seconds
from runtime.cli.specs import open_agent

__all__ = ["COMMANDS"]

SCHEDULE_ACTIONS = ("add", "list", "pause", "resume", "remove")
QUEUE_ACTIONS = ("set", "clear", "list")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _schedule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=SCHEDULE_ACTIONS, help="what to do")
    parser.add_argument("name", nargs="?", metavar="NAME", help="the schedule's name")
    parser.add_argument("--cron", metavar="EXPR", help='add: when, e.g. "0 9 * * 1-5"')
    parser.add_argument("--agent", metavar="MODULE:ATTR", help="add: the agent of each run")
    parser.add_argument("--input", metavar="TEXT", help="add: the input of each run")
    parser.add_argument(
        "--tz", metavar="ZONE", default="UTC", help="add: the cron's time zone (default UTC)"
    )
    parser.add_argument(
        "--missed",
        choices=("skip", "catch-up"),
        default="skip",
        help="add: slots no worker started in time: skip them (default), or catch up",
    )
    parser.add_argument(
        "--catch-up",
        type=_positive,
        metavar="N",
        help="add, with --missed catch-up: start at most the N newest missed slots (default 1)",
    )
    parser.add_argument("--queue", metavar="QUEUE", help="add: submit each run to this queue")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


async def _schedule(inv: Invocation) -> int:
    args = inv.args
    action = args.action
    adding = ("cron", "agent", "input", "catch_up", "queue")
    if action != "add":
        given = [f"--{n.replace('_', '-')}" for n in adding if getattr(args, n) is not None]
        if given or args.tz != "UTC" or args.missed != "skip":
            raise Failure(
                f"schedule {action} takes no {', '.join(given) or 'add options'}", EXIT_USAGE
            )
    if action != "list" and not args.name:
        raise Failure(f"schedule {action} needs the schedule's NAME", EXIT_USAGE)
    if action == "list" and args.name:
        raise Failure("schedule list takes no NAME", EXIT_USAGE)
    if action == "add":
        missing = [f"--{n}" for n in ("cron", "agent", "input") if getattr(args, n) is None]
        if missing:
            raise Failure(f"schedule add needs {', '.join(missing)}", EXIT_USAGE)
        if args.catch_up is not None and args.missed != "catch-up":
            raise Failure("--catch-up goes with --missed catch-up", EXIT_USAGE)
    if action == "add":
        async with open_agent(args.agent):
            pass  # its spec imports and builds an agent: workers will build it for each run
    async with inv.journal(create=action == "add") as journal:
        schedules = journal.schedules
        if action == "add":
            schedule = await schedules.add(
                args.name,
                cron=args.cron,
                agent=args.agent,
                input=args.input,
                tz=args.tz,
                missed=args.missed,
                catch_up=args.catch_up or 1,
                queue=args.queue,
            )
            found = await schedules.get(schedule.name)
            if args.json:
                inv.out_json(_info_json(found))
            else:
                inv.out(
                    f"schedule {schedule.name}: {schedule.cron} ({schedule.tz}); next run "
                    f"{found.next_run} at {_when(found.next_slot_ms)}; workers start it "
                    f"(`{inv.command('worker')}`)"
                )
            return 0
        if action == "list":
            listed = await schedules.list()
            if args.json:
                inv.out_json([_info_json(i) for i in listed])
                return 0
            if not listed:
                inv.out("no schedules")
            for i in listed:
                s = i.schedule
                state = "paused" if i.paused else "active"
                inv.out(
                    f"{s.name}  {state}  {s.cron!r} {s.tz}  agent {s.agent}  "
                    f"last {i.last_run or '-'}  next {_when(i.next_slot_ms)}"
                )
            return 0
        await getattr(schedules, action)(args.name)
        if args.json:
            inv.out_json({"schedule": args.name, "done": action})
        else:
            inv.out(
                f"schedule {args.name}: {action}d"
                if action != "resume"
                else f"schedule {args.name}: resumed"
            )
    return 0


def _info_json(info: Any) -> dict[str, Any]:
    return {
        "name": info.schedule.name,
        **info.schedule.to_json(),
        "paused": info.paused,
        "last_run": info.last_run,
        "last_slot": _when(info.last_slot_ms) if info.last_slot_ms is not None else None,
        "next_run": info.next_run,
        "next_slot": _when(info.next_slot_ms) if info.next_slot_ms is not None else None,
    }


def _queue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=QUEUE_ACTIONS, help="what to do")
    parser.add_argument("name", nargs="?", metavar="QUEUE", help="the queue's name")
    parser.add_argument(
        "--concurrency", type=_positive, metavar="N", help="set: active runs of the queue at most"
    )
    parser.add_argument(
        "--key-concurrency",
        type=_positive,
        metavar="N",
        help="set: active runs of one concurrency key at most",
    )
    parser.add_argument(
        "--rate", type=_positive, metavar="N", help="set: runs started per --per seconds at most"
    )
    parser.add_argument("--per", type=_seconds, metavar="SECONDS", help="set: the rate's period")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


async def _queue(inv: Invocation) -> int:
    args = inv.args
    action = args.action
    limits = ("concurrency", "key_concurrency", "rate", "per")
    given = [f"--{n.replace('_', '-')}" for n in limits if getattr(args, n) is not None]
    if action != "set" and given:
        raise Failure(f"queue {action} takes no {', '.join(given)}", EXIT_USAGE)
    if action == "set" and not given:
        raise Failure(
            "queue set needs a limit: --concurrency, --key-concurrency or --rate", EXIT_USAGE
        )
    if action != "list" and not args.name:
        raise Failure(f"queue {action} needs the QUEUE name", EXIT_USAGE)
    if action == "list" and args.name:
        raise Failure("queue list takes no QUEUE", EXIT_USAGE)
    async with inv.journal(create=action == "set") as journal:
        if action == "set":
            set_to = await journal.queues.set(
                args.name,
                concurrency=args.concurrency,
                key_concurrency=args.key_concurrency,
                rate=args.rate,
                period=args.per,
            )
            if args.json:
                inv.out_json({"queue": args.name, **_limits_json(set_to)})
            else:
                inv.out(f"queue {args.name}: {set_to.describe()}")
            return 0
        if action == "clear":
            await journal.queues.clear(args.name)
            inv.out_json({"queue": args.name, "cleared": True}) if args.json else inv.out(
                f"queue {args.name}: no limits"
            )
            return 0
        listed = await journal.queues.list()
        if args.json:
            inv.out_json(
                [
                    {
                        "queue": q.name,
                        **_limits_json(q.limits),
                        "active": q.active,
                        "waiting": q.waiting,
                    }
                    for q in listed
                ]
            )
            return 0
        if not listed:
            inv.out("no queue has limits")
        for q in listed:
            described = q.limits.describe() if q.limits is not None else "no limits"
            inv.out(f"{q.name}  {described}  active {q.active}  waiting {q.waiting}")
    return 0


def _limits_json(limits: Any) -> dict[str, Any]:
    if limits is None:
        return {"concurrency": None, "key_concurrency": None, "rate": None, "per": None}
    return {
        "concurrency": limits.concurrency,
        "key_concurrency": limits.key_concurrency,
        "rate": limits.rate,
        "per": limits.period,
    }


COMMANDS = (
    Command(
        name="schedule",
        summary="schedules that start a run at each cron slot: add, list, pause, resume, remove",
        description=(
            "A schedule starts one run per due slot of its cron expression (five fields, or six\n"
            "with seconds first), in its time zone (an IANA name; daylight-saving changes\n"
            "follow Debian cron's rules). Workers start the slots: each slot's run id is\n"
            "derived from the schedule and the slot, so however many workers run, and however\n"
            "they crash, a slot starts one run. --missed skip (default) starts a slot at most\n"
            "60 s late; --missed catch-up --catch-up N starts the N newest missed slots."
        ),
        example=(
            '  {prog} schedule add report --cron "0 9 * * 1-5" --tz Europe/Paris \\\n'
            '      --agent reports:agent --input "Send the morning report"\n'
            "  {prog} schedule list\n"
            "  {prog} schedule pause report"
        ),
        arguments=_schedule_arguments,
        handler=_schedule,
    ),
    Command(
        name="queue",
        summary="the limits of a queue that runs are submitted to: set, clear, list",
        description=(
            "Workers start a queued run (`submit --queue`) only while its queue has room:\n"
            "fewer active runs than --concurrency, fewer of its key than --key-concurrency, and\n"
            "fewer started in the last --per seconds than --rate. A run is active from its first\n"
            "claim until it ends (a run that waits or halts keeps its place). Decided in the\n"
            "transaction that grants the run's lease: workers on many machines keep the limits."
        ),
        example=(
            "  {prog} queue set payments --concurrency 10 --key-concurrency 1\n"
            "  {prog} queue set mail --rate 100 --per 60\n"
            "  {prog} queue list"
        ),
        arguments=_queue_arguments,
        handler=_queue,
    ),
)
