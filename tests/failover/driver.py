"""A driver process for the failover harness: ``python -m tests.failover.driver URL RUNS TOLD``.

It starts RUNS runs of ``tests.cli.owned:payments`` one after another on the journal at URL,
through whatever the database does meanwhile: every third it drives itself to its end, the
others it submits for the workers. Each run the journal acknowledged (the call returned) is
written to the file TOLD with the status it was told, so the harness can check that nothing a
caller was told is committed went missing. A write refused while the database is away is tried
again, for a bounded while.
"""

from __future__ import annotations

import asyncio
import sys
import time

from runtime import Journal
from runtime.errors import RunBusy, StorageError
from tests.cli import owned

SPEC = "tests.cli.owned:payments"
RETRY_FOR = 120.0
"""Seconds one run is tried for before the driver gives it up (then it is never told)."""
GAP = 0.15
"""Seconds between two runs: the runs are still being started when the primary dies."""


async def main(url: str, runs: int, told_path: str) -> None:
    async with Journal(url, lease_ttl=3.0) as journal:
        with open(told_path, "a", encoding="utf-8") as told:
            for i in range(runs):
                run_id = f"d{i:03d}"
                deadline = time.monotonic() + RETRY_FOR
                while True:
                    try:
                        if i % 3 == 0:
                            result = await owned.payments.run(
                                run_id, "go", journal=journal, spec=SPEC
                            )
                        else:
                            result = await owned.payments.submit(
                                run_id, "go", journal=journal, spec=SPEC
                            )
                    except RunBusy:
                        break  # an attempt of ours got that far and holds it: workers will
                    except StorageError as exc:
                        print(f"{run_id}: {exc}", file=sys.stderr, flush=True)
                        if time.monotonic() > deadline:
                            break
                        await asyncio.sleep(0.2)
                        continue
                    told.write(f"{run_id} {result.status.value}\n")
                    told.flush()
                    break
                await asyncio.sleep(GAP)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
