"""bide's conversation as the Agents SDK's input items, and an SDK response as bide's turn.
Pure conversions, no I/O."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents.items import ModelResponse, TResponseInputItem
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from runtime.errors import ProtocolError
from runtime.messages import (
    AssistantTurn,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["to_input_items", "to_turn"]


def to_input_items(messages: Sequence[Message]) -> list[TResponseInputItem]:
    """The conversation in the Responses input format the SDK's models take."""
    items: list[Any] = []
    for message in messages:
        if isinstance(message, UserMessage):
            items.append({"role": "user", "content": message.text})
        elif isinstance(message, ToolResultMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.call_id,
                    "output": _output(message),
                }
            )
        else:
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            for call in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": json.dumps(call.arguments),
                    }
                )
    return items


def _output(message: ToolResultMessage) -> str:
    content = message.content
    if message.is_error and isinstance(content, dict) and isinstance(content.get("message"), str):
        return f"error: {content['message']}"
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True)


def to_turn(response: ModelResponse) -> AssistantTurn:
    """The turn bide journals for an SDK response: its text, its function calls (by call id),
    usage. Items bide cannot replay (hosted tools) are refused; reasoning is not journaled."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            for part in item.content:
                texts.append(part.text if isinstance(part, ResponseOutputText) else part.refusal)
        elif isinstance(item, ResponseFunctionToolCall):
            try:
                arguments = json.loads(item.arguments or "{}")
            except ValueError as exc:
                arguments = {"_unparsed": item.arguments, "_error": str(exc)}
            calls.append(ToolCall(item.call_id, item.name, arguments))
        elif isinstance(item, ResponseReasoningItem):
            continue
        else:
            raise ProtocolError(
                f"the model returned a {item.type!r} item, which bide does not journal"
            )
    usage = response.usage
    return AssistantTurn(
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        usage=Usage(int(usage.input_tokens or 0), int(usage.output_tokens or 0)),
        finish_reason="tool_calls" if calls else "stop",
    )
