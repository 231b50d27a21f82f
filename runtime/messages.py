"""The data that flows between the loop and the model: turns, tool calls, results. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.errors import ProtocolError

__all__ = [
    "AssistantTurn",
    "Message",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a model turn consumed, as the provider reported them, and its cost where the
    provider reports one (``None``: not reported)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost is not None or other.cost is not None:
            cost = (self.cost or 0) + (other.cost or 0)
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.cost is not None:  # absent, not null: records written before cost agree
            out["cost"] = self.cost
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        cost = data.get("cost")
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is what the model sent (normally an object)."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """One answer of the model: text, tool calls, usage and why it stopped."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    finish_reason: str = "stop"

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [call.to_json() for call in self.tool_calls],
            "usage": self.usage.to_json(),
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AssistantTurn:
        try:
            calls = tuple(
                ToolCall(str(c["id"]), str(c["name"]), c.get("arguments", {}))
                for c in data.get("tool_calls") or ()
            )
            return cls(
                text=data.get("text"),
                tool_calls=calls,
                usage=Usage.from_json(data.get("usage")),
                finish_reason=str(data.get("finish_reason") or "stop"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed assistant turn: {exc}") from exc


@dataclass(frozen=True, slots=True)
class UserMessage:
    """The run's input, as the first message of the conversation."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """What the model sees of one call: its value, or its error when ``is_error``."""

    call_id: str
    name: str
    content: Any
    is_error: bool = False


Message = UserMessage | AssistantTurn | ToolResultMessage
