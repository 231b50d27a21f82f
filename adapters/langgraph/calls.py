"""One guarded LangGraph tool call as a bide run of its own: a run whose single recorded turn asks
for that call (the thread's tool call, by its id) and whose output is the call's result. bide's
loop then gives the call the guarantee (``docs/guarantee.md``): a READ_ONLY call re-runs, an
IDEMPOTENT one retries with the same key, a SIDE_EFFECT writes its attempt marker before it
runs and halts when its outcome is unknown. Nothing here imports LangGraph."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from adapters._calls import CallSlot
from runtime import Agent, AssistantTurn, Message, ToolCall
from runtime.errors import ConfigError, ProtocolError
from runtime.messages import ToolResultMessage, UserMessage
from runtime.tools import Safety, ToolContext, ToolSpec

__all__ = ["Runner", "call_agent", "call_context", "call_input"]

Runner = Callable[[ToolContext], Awaitable[Any]]
"""Runs the LangGraph tool of one call (given bide's context of it) and returns its result as
JSON data."""

_SLOT = CallSlot("bide_langgraph_call", inside="a tool bide's guard runs")


def call_context() -> ToolContext:
    """bide's context of the guarded tool call running now: its ``idempotency_key`` (the same
    on every attempt), ``run_id`` and ``call_id``. Only inside a tool the guard runs."""
    return _SLOT.current()


def call_input(call_id: str, tool: str, arguments: Any) -> str:
    """The run's input: the call it is for. The same on every replay of the call (LangGraph
    replays a call with the arguments its checkpoint holds); different arguments under one
    call id are refused by bide as a different input."""
    return json.dumps({"call_id": call_id, "tool": tool, "arguments": arguments}, sort_keys=True)


class _OneCall:
    """The model of a guarded call's run: its first turn asks for the call the input names; a
    second turn (only after the call's error result) ends the run."""

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        first = messages[0]
        if not isinstance(first, UserMessage):
            raise ProtocolError("a guarded call's run starts with its input")
        if any(isinstance(m, ToolResultMessage) for m in messages):
            return AssistantTurn(text="the call failed")
        asked = json.loads(first.text)
        call = ToolCall(asked["call_id"], asked["tool"], asked["arguments"])
        return AssistantTurn(tool_calls=(call,), finish_reason="tool_calls")


class _GuardedTool:
    """The LangGraph tool of a guarded call, as bide's loop runs it: the runner of the run that
    is being driven (``runners``, by run id) does the work."""

    def __init__(self, name: str, safety: Safety, runners: Mapping[str, Runner]):
        self.spec = ToolSpec(
            name=name,
            description=f"the LangGraph tool {name}",
            input_schema={"type": "object"},
            safety=safety,
        )
        self.runners = runners

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        if context is None or context.run_id not in self.runners:
            raise ConfigError(f"tool {self.spec.name} runs only through bide's LangGraph guard")
        with _SLOT.holding(context):
            return await self.runners[context.run_id](context)


def call_agent(name: str, safety: Safety, runners: Mapping[str, Runner]) -> Agent[Any]:
    """The bide agent whose runs are guarded calls of the tool ``name``: the call's value ends
    the run as its output (``output_tools``)."""
    return Agent(
        model=_OneCall(),
        tools=[_GuardedTool(name, safety, runners)],
        name=f"langgraph:{name}",
        max_turns=2,
        max_concurrency=1,
        output_tools=[name],
    )
