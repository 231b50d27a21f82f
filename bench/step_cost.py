"""What one sequential step costs the process, for profilers and counters rather than a clock.

Run: python bench/step_cost.py STEPS {ro,se} [FILE | mem]. One ``agent.run`` of STEPS steps (a
model turn asking for one call of a trivial tool, then the call) on a fresh journal file at
``synchronous=FULL`` (or on ``MemoryStore``: the loop alone), after a 20-step warm-up run. The
model answers in constant time (``ScriptedModel`` scans the conversation on every turn, which
would grow the count with the history). It prints, per step: wall time, user and system CPU,
context switches and commits. Under ``valgrind --tool=callgrind``, two sizes give the
instructions of one step: (Ir at 600 - Ir at 100) / 500, whatever the machine's load
(`bench/README.md`, "Issue 35"). The venv that runs it decides which bide it measures.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from runtime import Agent, AssistantTurn, Journal, Message, Safety, ToolSpec, tool
from runtime.testing import MemoryStore, ScriptedModel

structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    cache_logger_on_first_use=True,
)


class Counted(ScriptedModel):
    """The script's turns in order, by a counter: constant time per turn."""

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: Any = None,
    ) -> AssistantTurn:
        turn = self.turns[self.calls]
        self.calls += 1
        return turn


async def _echo(i: int) -> dict[str, int]:
    """Return its argument."""
    return {"r": i}


def _script(n: int) -> list[Mapping[str, Any]]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "arguments": {"i": i}}]} for i in range(n)
    ]
    return [*calls, {"text": "done"}]


async def main(n: int, safety: str, where: str) -> None:
    echo = tool(name="echo", safety=Safety.READ_ONLY if safety == "ro" else Safety.SIDE_EFFECT)(
        _echo
    )
    if where == "mem":
        journal = Journal(store=MemoryStore(check=False))
    else:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(where + suffix):
                os.remove(where + suffix)
        journal = Journal(where)
    async with journal:
        warm = Agent(model=Counted(_script(20)), tools=[echo], max_turns=30, name="b")
        await warm.run("warm", "go", journal=journal)
        agent = Agent(model=Counted(_script(n)), tools=[echo], max_turns=n + 2, name="b")
        commits = getattr(journal.store, "commits", 0)
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        result = await agent.run("t", "go", journal=journal)
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        assert result.status.value == "completed", result
        commits = getattr(journal.store, "commits", 0) - commits
    if where != "mem":
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(where + suffix):
                os.remove(where + suffix)

    def per(a: float, b: float) -> float:
        return (b - a) / n

    print(
        f"steps={n} safety={safety} store={'memory' if where == 'mem' else 'sqlite'} "
        f"wall_us={wall / n * 1e6:.0f} user_us={per(before.ru_utime, after.ru_utime) * 1e6:.0f} "
        f"sys_us={per(before.ru_stime, after.ru_stime) * 1e6:.0f} "
        f"vcsw={per(before.ru_nvcsw, after.ru_nvcsw):.1f} "
        f"ivcsw={per(before.ru_nivcsw, after.ru_nivcsw):.1f} commits={commits}"
    )


if __name__ == "__main__":
    steps, kind = int(sys.argv[1]), sys.argv[2]
    default = os.path.join(tempfile.gettempdir(), f"bide-step-cost-{os.getpid()}.db")
    asyncio.run(main(steps, kind, sys.argv[3] if len(sys.argv) > 3 else default))
