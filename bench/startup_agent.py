"""The agent of ``bench/startup.py``'s runs, in a module of its own: a resumed process imports
it, and should import no more than an application's agent module would."""

from __future__ import annotations

import os
from typing import Any

from runtime import Agent, Safety, tool
from runtime.testing import ScriptedModel

CALLS_VARIABLE = "BIDE_BENCH_STARTUP_CALLS"


@tool(safety=Safety.READ_ONLY)
async def echo(i: int) -> dict[str, int]:
    """Return its argument."""
    return {"i": i}


def make_agent() -> Agent:
    """``$BIDE_BENCH_STARTUP_CALLS`` READ_ONLY calls, then an answer."""
    calls = int(os.environ.get(CALLS_VARIABLE, "1"))
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{n}", "name": "echo", "arguments": {"i": n}}]}
        for n in range(calls)
    ]
    script.append({"text": "done"})
    return Agent(model=ScriptedModel(script), tools=[echo], name="startup", max_turns=calls + 1)
