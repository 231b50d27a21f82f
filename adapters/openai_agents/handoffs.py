"""An Agents SDK handoff as a durable child run (``runtime.children``): the model's call of
``transfer_to_<agent>`` drives a child run of the target agent, which is given the conversation
so far and whose output ends the parent's run, as the SDK's handoff makes the target's answer
the run's. A crash anywhere resumes the same child from its own journal."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents import Agent as SDKAgent
from agents.handoffs import Handoff
from agents.items import TResponseInputItem

from adapters.openai_agents._items import to_input_items
from runtime import RunState
from runtime.children import ChildTool
from runtime.errors import ConfigError, ProtocolError
from runtime.messages import AssistantTurn, Message, ToolResultMessage, UserMessage
from runtime.result import RunResult
from runtime.tools import ToolContext, ToolSpec

if TYPE_CHECKING:
    from runtime.agent import Agent

__all__ = ["HANDOFF_INPUT", "HandoffTool", "handed_items", "target_of"]

HANDOFF_INPUT = "bide.openai_agents.handoff"
"""The key of a child run's input that carries the conversation handed to it."""


def target_of(entry: SDKAgent[Any] | Handoff[Any, Any]) -> tuple[SDKAgent[Any], str, str]:
    """The agent a handoff hands to, its tool name and description. A ``Handoff`` is taken
    only as ``handoff(agent)`` makes it with no callback, no input and no input filter: those
    run inside the SDK's loop, outside the journal."""
    if isinstance(entry, SDKAgent):
        return entry, Handoff.default_tool_name(entry), Handoff.default_tool_description(entry)
    if not isinstance(entry, Handoff):
        raise ConfigError(f"a handoff must be an agents.Agent or a Handoff, got {entry!r}")
    what = f"handoff {entry.tool_name}"
    if entry.input_filter is not None:
        raise ConfigError(f"{what}: an input_filter is not supported through bide")
    if entry.input_json_schema.get("properties"):
        raise ConfigError(f"{what}: a handoff input (input_type) is not supported through bide")
    if entry.is_enabled is not True:
        raise ConfigError(f"{what}: is_enabled computed per run is not supported through bide")
    if _has_callback(entry):
        raise ConfigError(f"{what}: on_handoff is not supported through bide (it runs unjournaled)")
    # The SDK keeps the target of handoff(agent) only as this weak reference.
    ref = entry._agent_ref
    target = ref() if ref is not None else None
    if not isinstance(target, SDKAgent):
        raise ConfigError(f"{what}: give handoff(agent) or the agent itself")
    return target, entry.tool_name, entry.tool_description


def _has_callback(entry: Handoff[Any, Any]) -> bool:
    invoke = getattr(entry.on_invoke_handoff, "args", ())
    for fn in invoke:
        if callable(fn):
            try:
                found = inspect.getclosurevars(fn).nonlocals.get("on_handoff")
            except TypeError:
                continue
            if found is not None:
                return True
    return False


class HandoffTool(ChildTool):
    """The handoff tool of a ``DurableSDKAgent``: one of its agent's ``output_tools``, so the
    target's output is the run's. The target sees the conversation before the turn that
    handed off, then that turn's text and the handoff call with the SDK's transfer message;
    results of other calls of that turn are not passed on (the child's input must be the same
    on every drive, and they may not all have finished)."""

    def __init__(self, target: Agent[Any], *, name: str, description: str):
        super().__init__(target, name=name, description=description)
        self.target = target
        self.spec = ToolSpec(
            name=name,
            description=description,
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            safety=self.spec.safety,
        )

    def child_input(
        self, arguments: Mapping[str, Any], parent: RunState, context: ToolContext
    ) -> str:
        return json.dumps(
            {HANDOFF_INPUT: _handed_items(parent, context.call_id, self.target.name)},
            sort_keys=True,
        )

    def value(self, child: str, result: RunResult[Any]) -> Any:
        """The target's output, as JSON data: the parent's output (its ``output_tools``)."""
        return result.output if result.output_json is None else result.output_json


def _handed_items(state: RunState, call_id: str, target: str) -> list[Any]:
    live = list(state.turns.live)
    at = next((i for i, t in enumerate(live) if any(c.id == call_id for c in t.tool_calls)), None)
    if at is None:
        raise ProtocolError(f"handoff call {call_id} is not in the run's latest turns")
    messages: list[Message] = [UserMessage(str(state.input))]
    history = state.history  # the turns folded into history records, settled
    if history is not None:
        messages += [history.message(j) for j in range(history.messages)]
    for turn in live[:at]:
        messages.append(turn)
        for call in turn.tool_calls:
            content, is_error = state.calls[call.id].message_content()
            messages.append(ToolResultMessage(call.id, call.name, content, is_error))
    turn = live[at]
    handed = AssistantTurn(turn.text, tuple(c for c in turn.tool_calls if c.id == call_id))
    transfer = json.dumps({"assistant": target})
    messages += [handed, ToolResultMessage(call_id, handed.tool_calls[0].name, transfer, False)]
    return to_input_items(messages)


def handed_items(messages: Sequence[Message]) -> list[TResponseInputItem] | None:
    """The SDK input items for a handed-off run (its input carries the conversation handed to
    it), or ``None`` when its input is not a handoff's."""
    first = messages[0] if messages else None
    if not isinstance(first, UserMessage):
        return None
    try:
        decoded = json.loads(first.text)
    except ValueError:
        return None
    if not isinstance(decoded, dict) or not isinstance(decoded.get(HANDOFF_INPUT), list):
        return None
    return [*decoded[HANDOFF_INPUT], *to_input_items(messages[1:])]
