"""A run's model turns: the conversation the model is shown, built from the journal, and the
checks a turn must pass (and the plan journaled with it) before any of its calls is acted on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import ProtocolError
from runtime.messages import AssistantTurn, Message, ToolResultMessage, UserMessage
from runtime.state import RunState
from runtime.tools import Tool

__all__ = ["Conversation", "check_turn", "plan_of"]


class Conversation:
    """The messages of one drive's run, rendered from its ``RunState`` as turns complete."""

    __slots__ = ("_messages", "_rendered")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._rendered = 0

    def messages(self, state: RunState) -> list[Message]:
        """The input, then each turn with its calls' results, as the model is to see them."""
        # Built incrementally: a new turn is asked for only when every call of the turns before
        # has its result, so the messages of those turns never change once rendered.
        messages = self._messages
        if not messages:
            messages.append(UserMessage(str(state.input)))
        for turn in state.turns[self._rendered :]:
            messages.append(turn)
            for call in turn.tool_calls:
                content, is_error = state.calls[call.id].message_content()
                messages.append(ToolResultMessage(call.id, call.name, content, is_error))
        self._rendered = len(state.turns)
        return list(messages)


def check_turn(turn: AssistantTurn, state: RunState) -> None:
    """``ProtocolError`` for a turn whose calls cannot be journaled as calls of this run: a
    missing or overlong id, an id twice in the turn or reused from an earlier one, no name."""
    run_id = state.run_id
    seen: set[str] = set()
    for call in turn.tool_calls:
        if not isinstance(call.id, str) or not call.id or len(call.id) > 256:
            raise ProtocolError(
                f"the model sent a tool call without a usable id ({call.id!r})", run_id=run_id
            )
        if call.id in seen:
            raise ProtocolError(
                f"the model sent call id {call.id!r} twice in one turn", run_id=run_id
            )
        if call.id in state.calls:
            raise ProtocolError(
                f"the model reused call id {call.id!r} from an earlier turn", run_id=run_id
            )
        if not isinstance(call.name, str):
            raise ProtocolError("the model sent a tool call without a name")
        seen.add(call.id)


def plan_of(tools: Mapping[str, Tool], name: str) -> dict[str, Any]:
    """What the turn journals of a call's tool: its Safety and approval policy, or unknown."""
    tool = tools.get(name)
    if tool is None:
        return {"unknown": True}
    approval = tool.spec.approval
    return {
        "safety": tool.spec.safety.value,
        "approval": approval.to_json() if approval is not None else None,
    }
