"""Agents for the queue and schedule tests (``tests.queues.agents:ATTR``): a READ_ONLY step that
takes ``STEP`` seconds (from the environment of the process driving the run), then an answer."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from runtime import Agent, Safety, tool
from runtime.testing import ScriptedModel

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "step", "arguments": {}}]},
    {"text": "done"},
]


@tool(safety=Safety.READ_ONLY)
async def step() -> dict[str, Any]:
    """Work for STEP seconds."""
    await asyncio.sleep(float(os.environ.get("STEP") or 0.05))
    return {"ok": True}


def make() -> Agent:
    return Agent(model=ScriptedModel(SCRIPT), tools=[step])


worker_agent = make()
