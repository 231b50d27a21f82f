"""Drive several runs in one process at once: ``python -m tests.crash.multi --db DB --agent SPEC
RUN_ID...``. Starts each run (or resumes it) through the library with ``asyncio.gather``, so one
SIGKILL stops them all mid-flight and their writes share the journal's group commits.

Prints each run's status as JSON; exits 0 if all completed, 4 if the others completed and some
halted, 1 otherwise. Logs JSON lines on stderr as the CLI does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from runtime import Journal, faults
from runtime.cli.logs import configured
from runtime.cli.specs import open_agent
from runtime.logs import get_logger
from tests.crash import mutants
from tests.crash.agents import run_input

log = get_logger("runtime.cli")  # a CLI of its own: its lines go where the CLI's go


async def drive(db: str, spec: str, run_ids: list[str]) -> dict[str, str]:
    async with open_agent(spec) as agent, Journal(db) as journal:
        log.info("drive_started", runs=len(run_ids))
        results = await asyncio.gather(
            *(agent.run(r, run_input(r), journal=journal, spec=spec) for r in run_ids),
            return_exceptions=True,
        )
    return {
        r: res.status.value if not isinstance(res, BaseException) else f"error: {res!r}"
        for r, res in zip(run_ids, results, strict=True)
    }


def main(argv: list[str]) -> int:
    mutants.apply_from_env()
    parser = argparse.ArgumentParser(prog="python -m tests.crash.multi")
    parser.add_argument("--db", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("run_ids", nargs="+")
    args = parser.parse_args(argv)
    with configured(level=logging.INFO, fmt="json"):
        statuses = asyncio.run(drive(args.db, args.agent, args.run_ids))
    print(json.dumps(statuses))
    values = set(statuses.values())
    if values == {"completed"}:
        return 0
    if values <= {"completed", "halted"}:
        return 4
    print(f"multi: {statuses}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    faults.arm_from_environment()
    raise SystemExit(main(sys.argv[1:]))
