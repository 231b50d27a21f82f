"""bide's conversation as Pydantic AI messages, and a Pydantic AI response as bide's turn.

Pure conversions, no I/O: the model adapter sends what ``to_model_messages`` builds and journals
what ``to_turn`` returns.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from runtime.errors import ProtocolError
from runtime.messages import (
    AssistantTurn,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["to_model_messages", "to_turn"]


def to_model_messages(instructions: str | None, messages: Sequence[Message]) -> list[ModelMessage]:
    """The conversation as Pydantic AI's request/response list; ``instructions`` on each request
    (Pydantic AI's models read them from the latest request)."""
    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []

    def close_request() -> None:
        if parts:
            out.append(ModelRequest(parts=list(parts), instructions=instructions))
            parts.clear()

    for message in messages:
        if isinstance(message, UserMessage):
            parts.append(UserPromptPart(message.text))
        elif isinstance(message, ToolResultMessage):
            # A journaled error (the tool raised ModelRetry or ToolFailed, its arguments were
            # refused, a person resolved it as failed) is a failed return the model adapts to.
            parts.append(
                ToolReturnPart(
                    tool_name=message.name,
                    content=_error_text(message.content) if message.is_error else message.content,
                    tool_call_id=message.call_id,
                    outcome="failed" if message.is_error else "success",
                )
            )
        else:
            close_request()
            out.append(_response(message))
    close_request()
    return out


def _response(turn: AssistantTurn) -> ModelResponse:
    response_parts: list[ModelResponsePart] = []
    if turn.text:
        response_parts.append(TextPart(turn.text))
    for call in turn.tool_calls:
        response_parts.append(ToolCallPart(call.name, call.arguments, tool_call_id=call.id))
    return ModelResponse(
        parts=response_parts,
        usage=RequestUsage(
            input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens
        ),
    )


def to_turn(response: ModelResponse, *, output_tools: Collection[str] = ()) -> AssistantTurn:
    """The turn bide journals for a Pydantic AI response: its text, its tool calls (by the ids
    the model gave them), usage and finish reason. Parts bide cannot replay are refused.

    A call of one of ``output_tools`` is the final answer: the turn's text is the JSON of its
    arguments and it has no tool calls (other calls in the same response are not run, as with
    Pydantic AI's ``end_strategy='early'``)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in response.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            try:
                arguments = part.args_as_dict()
            except (ValueError, TypeError) as exc:
                arguments = {"_unparsed": str(part.args), "_error": str(exc)}
            if part.tool_name in output_tools:
                return AssistantTurn(
                    text=json.dumps(arguments, sort_keys=True),
                    usage=_usage(response),
                    finish_reason="stop",
                )
            calls.append(ToolCall(part.tool_call_id, part.tool_name, arguments))
        elif part.part_kind == "thinking":
            continue  # not journaled: the model's reasoning is not part of what it decided
        else:
            raise ProtocolError(
                f"the model returned a {part.part_kind!r} part, which bide does not journal "
                "(native tools and files are not supported through bide)"
            )
    return AssistantTurn(
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        usage=_usage(response),
        finish_reason=str(response.finish_reason or ("tool_calls" if calls else "stop")),
    )


def _usage(response: ModelResponse) -> Usage:
    usage = response.usage
    return Usage(int(usage.input_tokens or 0), int(usage.output_tokens or 0))


def _error_text(content: Any) -> str:
    message = content.get("message") if isinstance(content, dict) else None
    if isinstance(message, str):
        return message
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, default=str)
