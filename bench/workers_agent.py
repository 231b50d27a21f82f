"""The agent of ``bench/workers.py``'s runs, in a module of its own: each worker process builds
it from the spec its runs journal (``bench.workers_agent:make_agent``)."""

from __future__ import annotations

from typing import Any

from runtime import Agent, ToolContext, tool
from runtime.testing import ScriptedModel


@tool  # a SIDE_EFFECT: an attempt marker, then the result
async def charge(amount: int, context: ToolContext) -> dict[str, Any]:
    """Charge nothing, at once: the run's cost is the journal's."""
    return {"charged": amount, "key": context.idempotency_key}


def make_agent() -> Agent:
    """One side effect, then an answer: header, start, turn, marker, result, turn, end."""
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
        {"text": "charged"},
    ]
    return Agent(model=ScriptedModel(script), tools=[charge], name="bench-workers")
