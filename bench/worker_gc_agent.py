"""The agent of ``bench/worker_gc.py``'s runs: issue 15's concurrent run (the model sleeps
``BIDE_BENCH_MODEL_SECONDS``, 0.1 s by default, and asks for one SIDE_EFFECT call, the call, the
model sleeps again and answers), in a module that imports nothing but ``runtime``, so a worker
of any checkout can build it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from runtime import Agent, AssistantTurn, Message, ToolSpec, tool
from runtime.testing import ScriptedModel

SECONDS = float(os.environ.get("BIDE_BENCH_MODEL_SECONDS", "0.1"))


class _Sleepy(ScriptedModel):
    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        await asyncio.sleep(SECONDS)
        return await super().complete(system_prompt, messages, tools)


@tool
async def act() -> dict[str, Any]:
    """A side effect that does nothing: the run's cost is the runtime's."""
    return {"done": True}


def make_agent() -> Agent:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c1", "name": "act", "arguments": {}}]},
        {"text": "done"},
    ]
    return Agent(model=_Sleepy(script), tools=[act], name="worker-gc")
