"""For tests, demos and users' own tests: ScriptedModel (a Model that replays a script) and
MemoryStore (a journal's store in memory)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.errors import ConfigError
from runtime.messages import AssistantTurn, Message, ToolCall, Usage
from runtime.store.memory import MemoryStore
from runtime.tools import ToolSpec

__all__ = ["MemoryStore", "ScriptedModel"]


class ScriptedModel:
    """Replays a list of turns: ``{"text": ...}`` or ``{"tool_calls": [...], "text": ...}``.

    The answer is chosen by how many assistant turns the conversation already holds, never by an
    internal counter, so a run resumed in a fresh process gets the right turn. ``calls`` counts
    the requests this instance answered (to check that a resume asked for nothing recorded).
    """

    def __init__(self, turns: Sequence[Mapping[str, Any]]):
        if not isinstance(turns, list | tuple):
            raise ConfigError("ScriptedModel needs a list of turns")
        self.turns = tuple(_parse_turn(i, turn) for i, turn in enumerate(turns))
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedModel:
        """Read the same list of turns from a JSON file."""
        try:
            with open(path, encoding="utf-8") as f:
                turns = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read script {os.fspath(path)}: {exc}") from exc
        return cls(turns)

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        index = sum(isinstance(m, AssistantTurn) for m in messages)
        if index >= len(self.turns):
            raise ConfigError(
                f"ScriptedModel has {len(self.turns)} turns; the conversation asks for turn "
                f"{index + 1}"
            )
        self.calls += 1
        return self.turns[index]


def _parse_turn(index: int, turn: Mapping[str, Any]) -> AssistantTurn:
    where = f"script turn {index + 1}"
    if not isinstance(turn, Mapping):
        raise ConfigError(f"{where}: a turn is an object with 'text' and/or 'tool_calls'")
    unknown = set(turn) - {"text", "tool_calls", "usage"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"{where}: 'text' must be a string")
    calls = []
    for call in turn.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not {"id", "name"} <= set(call):
            raise ConfigError(f"{where}: each tool call needs 'id' and 'name'")
        calls.append(ToolCall(str(call["id"]), str(call["name"]), call.get("arguments", {})))
    if text is None and not calls:
        raise ConfigError(f"{where}: a turn needs 'text' or 'tool_calls'")
    usage = turn.get("usage")
    return AssistantTurn(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage.from_json(usage if isinstance(usage, Mapping) else None),
        finish_reason="tool_calls" if calls else "stop",
    )
