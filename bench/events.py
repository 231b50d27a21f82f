"""A slow follower against a 1,000-step run: does following slow the drive? (issue 31)

Interleaved in one process, on one SQLite journal file per sample: the same 1,000-step run of
READ_ONLY calls (``bench/workload``-like: a ScriptedModel turn asking for one trivial call, then
the call) driven with nobody following, then with a follower in this process that sleeps
``--lag`` ms per event (it falls behind at once, and reads what it missed from the journal),
then with a follower that keeps up. Prints each sample and the medians; nothing is asserted.

    .venv/bin/python bench/events.py [--steps 1000] [--repeats 5] [--lag 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime import Agent, Journal, Safety, tool
from runtime.testing import ScriptedModel


def make_agent(steps: int) -> Agent:
    @tool(safety=Safety.READ_ONLY)
    async def echo(i: int) -> int:
        """Echo."""
        return i

    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "arguments": {"i": i}}]}
        for i in range(steps)
    ]
    turns.append({"text": "done"})
    return Agent(model=ScriptedModel(turns), tools=[echo], max_turns=steps + 1)


async def sample(steps: int, mode: str, lag_s: float) -> tuple[float, int]:
    """Seconds the drive took, and how many journaled events the follower read in all."""
    with tempfile.TemporaryDirectory() as where:
        async with Journal(Path(where) / "bide.db") as journal:
            agent = make_agent(steps)
            seen = 0

            async def follow() -> None:
                nonlocal seen
                async for event in journal.events("r", idle=60):
                    seen += event.cursor is not None
                    if mode == "slow":
                        await asyncio.sleep(lag_s)

            follower = None
            if mode != "none":
                await journal.store.create_run("r", agent=agent.name)  # so it can be followed
                follower = asyncio.create_task(follow())
                await asyncio.sleep(0.05)
            started = time.perf_counter()
            result = await agent.run("r", "go", journal=journal)
            took = time.perf_counter() - started
            assert result.status.value == "completed", result
            if follower is not None:
                await follower
            return took, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lag", type=float, default=5.0, help="ms the slow follower sleeps")
    args = parser.parse_args()
    modes = ("none", "slow", "keeping-up")
    took: dict[str, list[float]] = {m: [] for m in modes}
    asyncio.run(sample(50, "none", 0))  # warm imports and the first file
    for r in range(args.repeats):
        for mode in modes:
            seconds, seen = asyncio.run(sample(args.steps, mode, args.lag / 1000))
            took[mode].append(seconds)
            line = f"repeat {r + 1} {mode:>10}: drive {seconds * 1000:8.1f} ms"
            print(f"{line}, follower read {seen} events")
    print()
    base = statistics.median(took["none"])
    for mode in modes:
        median = statistics.median(took[mode])
        spread = f"{min(took[mode]) * 1000:.0f}-{max(took[mode]) * 1000:.0f}"
        print(f"{mode:>10}: median {median * 1000:8.1f} ms ({spread}), {median / base:.2f}x nobody")


if __name__ == "__main__":
    main()
