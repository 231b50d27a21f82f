"""The agents `bench/steps.py` drives, importable by a fresh process.

A step run is ``steps`` sequential steps, each a model turn (``ScriptedModel``) asking for one
call of the trivial tool ``echo``, then a final text. `python -m runtime resume` rebuilds the
agent from the spec the run journaled, ``bench.workload:make_agent``, so the step count and the
tool's Safety come from the environment (``BIDE_BENCH_STEPS``, ``BIDE_BENCH_SAFETY``), as they
would from a service's configuration.

A concurrent run (issue 15's first row) is: the model sleeps 0.1 s and asks for one SIDE_EFFECT
call, the call, the model sleeps 0.1 s and answers; ``plain_run`` is the same with plain asyncio.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Sequence
from typing import Any

from runtime import Agent, AssistantTurn, Message, Safety, ToolSpec, tool
from runtime.testing import ScriptedModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = "bench.workload:make_agent"
STEPS_ENV = "BIDE_BENCH_STEPS"
SAFETY_ENV = "BIDE_BENCH_SAFETY"


class Tally:
    """What the tools of this process did: executions, and the step whose call kills it."""

    executed = 0
    crash_at: int | None = None
    """Index ``i`` of the echo call that SIGKILLs this process (step ``i + 1``)."""


async def _echo(i: int) -> dict[str, int]:
    """Return its argument: the trivial tool of every step."""
    if i == Tally.crash_at:
        os.kill(os.getpid(), signal.SIGKILL)  # dies inside the call, as a crashed host does
    Tally.executed += 1
    return {"i": i}


ECHO = {
    Safety.READ_ONLY: tool(name="echo", safety=Safety.READ_ONLY)(_echo),
    Safety.SIDE_EFFECT: tool(name="echo", safety=Safety.SIDE_EFFECT)(_echo),
}


class TimedScript(ScriptedModel):
    """A ScriptedModel that adds up the time spent in it: the model's cost, not the runtime's
    (it also counts the conversation's turns on every call, O(history))."""

    def __init__(self, turns: Sequence[Any]):
        super().__init__(list(turns))
        self.seconds = 0.0

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        t = time.perf_counter()
        try:
            return await super().complete(system_prompt, messages, tools)
        finally:
            self.seconds += time.perf_counter() - t


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this repository importable (``bench.workload``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def answer(steps: int) -> str:
    return f"done after {steps} steps"


def script(steps: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "arguments": {"i": i}}]}
        for i in range(steps)
    ]
    return [*turns, {"text": answer(steps)}]


def build(steps: int, safety: Safety) -> Agent:
    """The step agent: its model is a ``TimedScript`` (``agent.model``)."""
    return Agent(
        model=TimedScript(script(steps)), tools=[ECHO[safety]], max_turns=steps + 1, name="steps"
    )


def make_agent() -> Agent:
    """The factory the journaled spec names (the CLI calls it with no arguments)."""
    return build(
        int(os.environ.get(STEPS_ENV, "1000")), Safety(os.environ.get(SAFETY_ENV, "read_only"))
    )


# --- issue 15's concurrent runs ---------------------------------------------------------------

MODEL_SECONDS = 0.1


class SleepyScript(ScriptedModel):
    """Each turn first waits ``MODEL_SECONDS``: the model call of a concurrent run."""

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        await asyncio.sleep(MODEL_SECONDS)
        return await super().complete(system_prompt, messages, tools)


async def _act() -> dict[str, str]:
    """A side effect: a counter increment."""
    Tally.executed += 1
    return {"t": "done"}


act = tool(name="act")(_act)  # a SIDE_EFFECT (the default): marker, the call, its result

CONC_SCRIPT = [{"tool_calls": [{"id": "c1", "name": "act", "arguments": {}}]}, {"text": "final"}]


def conc_agent() -> Agent:
    return Agent(model=SleepyScript(CONC_SCRIPT), tools=[act], name="conc")


async def plain_run() -> str:
    """The same run as plain asyncio: sleep, the side effect's own function, sleep."""
    await asyncio.sleep(MODEL_SECONDS)
    await _act()
    await asyncio.sleep(MODEL_SECONDS)
    return "final"
