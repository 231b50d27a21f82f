"""``worker``: claim the runs that need driving and drive them, until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

from runtime.cli.base import Command, Invocation
from runtime.cli.drive import _seconds
from runtime.cli.specs import open_agent

if TYPE_CHECKING:
    from runtime.worker import Worker

__all__ = ["COMMANDS", "YOUNG_THRESHOLD"]

YOUNG_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation while the worker serves (the
interpreter's default is 700): with thousands of runs in flight, each full collection visits
every live object, and most of a drive's objects are freed by reference counting anyway."""


def _worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="drive every run with this agent (default: the agent each run journaled)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="runs driven at once (default 4)"
    )
    parser.add_argument("--name", metavar="NAME", help="this worker's name in leases and `list`")
    parser.add_argument(
        "--poll",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="how often to look for runs to claim (default 1)",
    )
    parser.add_argument(
        "--grace",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long drives may take to reach a record boundary (default 30)",
    )
    parser.add_argument(
        "--lease-ttl",
        type=_seconds,
        metavar="SECONDS",
        help="how long a lease lasts unless renewed (default $BIDE_LEASE_TTL, else 15)",
    )
    parser.add_argument(
        "--exit-when-idle",
        type=_seconds,
        metavar="SECONDS",
        help="exit once nothing was driven or claimable for SECONDS (for batch jobs and tests)",
    )


async def _worker(inv: Invocation) -> int:
    from runtime.worker import Worker  # the worker's machinery, for this command alone

    args = inv.args
    async with inv.journal(create=True, lease_ttl=args.lease_ttl) as journal:
        if args.agent:
            async with open_agent(args.agent) as agent:
                worker = Worker(
                    journal,
                    agent=agent,
                    concurrency=args.concurrency,
                    poll=args.poll,
                    grace=args.grace,
                    name=args.name,
                    idle_exit=args.exit_when_idle,
                )
                await _serve(worker)
        else:
            worker = Worker(
                journal,
                open_agent=open_agent,
                concurrency=args.concurrency,
                poll=args.poll,
                grace=args.grace,
                name=args.name,
                idle_exit=args.exit_when_idle,
            )
            await _serve(worker)
    return 0


async def _serve(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, worker.stop)
    try:
        with _collector_tuned():
            await worker.run()
    finally:
        for sig in signals:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)


@contextlib.contextmanager
def _collector_tuned() -> Iterator[None]:
    """The cyclic collector as a long-lived worker wants it, for as long as it serves: what
    start-up made (modules, classes, the agent) frozen out of every collection, and the youngest
    generation collected every ``YOUNG_THRESHOLD`` allocations. The command owns its process;
    the library never touches the collector. Put back as it was when the worker stops."""
    threshold = gc.get_threshold()
    gc.collect()  # start-up's garbage is not frozen with what it keeps
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


COMMANDS = (
    Command(
        name="worker",
        summary="claim and drive the runs that need driving, until stopped",
        description=(
            "Drive every run of the journal that needs a driver: runs whose process died\n"
            "(orphaned), runs that `approve`, `answer` or `resolve` made ready, and runs\n"
            "`submit` started (a queued run once its queue's limits admit it), and start the\n"
            "due slots of schedules (`schedule`). Claiming a run is taking its lease, so\n"
            "several workers, on one machine or many, never drive one run at once. Each run is\n"
            "driven with the agent it\n"
            "journaled (or --agent). A run whose agent cannot be built is reported once and left\n"
            "alone. SIGTERM or SIGINT: stop claiming, let drives reach their next record within\n"
            "--grace, release every lease, exit 0."
        ),
        example=(
            "  {prog} worker --concurrency 8\n"
            "  {prog} worker --db /var/lib/bide/bide.db --name w-3 --agent myagents:support"
        ),
        arguments=_worker_arguments,
        handler=_worker,
    ),
)
