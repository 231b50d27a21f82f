"""The Model protocol: one async call from a conversation to the model's next turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from runtime.messages import AssistantTurn, Message
from runtime.tools import ToolSpec

__all__ = ["Model"]


@runtime_checkable
class Model(Protocol):
    """A chat model that can call tools.

    ``complete`` receives the system prompt, the whole conversation so far (the user's input,
    then each assistant turn followed by the results of its tool calls) and the tools the agent
    offers, and returns the next assistant turn. It raises ``ModelError`` on a provider failure.
    The runtime journals each turn before acting on it and never asks for a recorded turn again.
    """

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn: ...
