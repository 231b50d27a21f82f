"""An agent whose run takes a while (for followers to follow), and a follower to run as a
process of its own: ``python -m tests.runtime.events_helpers DB RUN AFTER`` prints one JSON line
per journaled event (cursor, type, call id), flushed, and exits when the run ends."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from runtime import Agent, Journal, Safety, tool
from runtime.testing import ScriptedModel

STEP_S = 0.02


def slow_agent(
    steps: int,
    *,
    step_s: float = STEP_S,
    name: str = "slow",
    gate: asyncio.Event | None = None,
    gate_at: int = 0,
) -> Agent:
    """``steps`` turns, each asking for one READ_ONLY lookup that takes ``step_s``; then an
    answer. Given ``gate``, lookup ``gate_at`` waits until it is set (bounded: 30 s)."""

    @tool(safety=Safety.READ_ONLY)
    async def lookup(i: int) -> dict[str, Any]:
        """Look a number up."""
        if gate is not None and i == gate_at:
            await asyncio.wait_for(gate.wait(), 30)
        await asyncio.sleep(step_s)
        return {"i": i}

    turns: list[dict[str, Any]] = [
        {
            "text": f"step {i}",
            "tool_calls": [{"id": f"c{i}", "name": "lookup", "arguments": {"i": i}}],
        }
        for i in range(1, steps + 1)
    ]
    turns.append({"text": "all steps done"})
    return Agent(model=ScriptedModel(turns), tools=[lookup], name=name, max_turns=steps + 1)


def key(event: Any) -> tuple[Any, ...]:
    """What identifies a journaled event: its cursor, type and call."""
    return (event.cursor, event.type, getattr(event, "call_id", None))


async def _follow(db: str, run_id: str, after: str) -> None:
    async with Journal(db, migrate=False) as journal:
        async for event in journal.events(run_id, after=after, idle=60):
            if event.live:
                continue
            line = {"cursor": event.cursor, "type": event.type}
            line["call_id"] = getattr(event, "call_id", None)
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(_follow(sys.argv[1], sys.argv[2], sys.argv[3]))
