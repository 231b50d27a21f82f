"""A run's model turns: the conversation the model is shown, built from the journal, and the
checks a turn must pass (and the plan journaled with it) before any of its calls is acted on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from runtime.errors import ProtocolError
from runtime.history import History
from runtime.jsontext import unstorable_text
from runtime.messages import AssistantTurn, Message, ToolResultMessage, UserMessage
from runtime.state import RunState
from runtime.tools import Tool

__all__ = ["Conversation", "Messages", "check_turn", "plan_of"]


class Conversation:
    """The messages of one drive's run, rendered from its ``RunState`` as turns complete."""

    __slots__ = ("_first", "_live", "_rendered")

    def __init__(self) -> None:
        self._first: UserMessage | None = None
        self._live: list[Message] = []
        self._rendered = 0

    def messages(self, state: RunState) -> Messages:
        """The input, then each turn with its calls' results, as the model is to see them."""
        # Built incrementally: a new turn is asked for only when every call of the turns before
        # has its result, so the messages of those turns never change once rendered.
        if self._first is None:
            self._first = UserMessage(str(state.input))
        live = self._live
        for turn in state.turns.live[self._rendered :]:
            live.append(turn)
            for call in turn.tool_calls:
                content, is_error = state.calls[call.id].message_content()
                live.append(ToolResultMessage(call.id, call.name, content, is_error))
        self._rendered = len(state.turns.live)
        return Messages(self._first, state.history, live)


class Messages(Sequence[Message]):
    """A conversation as it stood when it was asked for: the input, the messages of the run's
    history chunks (made as they are read), then those of the turns folded since."""

    __slots__ = ("_first", "_history", "_len", "_live", "_settled")

    def __init__(self, first: UserMessage, history: History | None, live: list[Message]):
        self._first = first
        self._history = history
        self._live = live
        self._settled = history.messages if history is not None else 0
        self._len = 1 + self._settled + len(live)  # later turns are not part of this one

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("message index out of range")
        if i == 0:
            return self._first
        if i <= self._settled:
            assert self._history is not None
            return self._history.message(i - 1)
        return self._live[i - 1 - self._settled]

    def __iter__(self) -> Iterator[Message]:
        yield self._first
        if self._history is not None:
            for j in range(self._settled):
                yield self._history.message(j)
        yield from self._live[: self._len - 1 - self._settled]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


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
        problem = unstorable_text(call.id, name="call id")
        if problem is not None:
            raise ProtocolError(
                f"the model's turn {len(state.turns) + 1} cannot be journaled: {problem} "
                f"({call.id!r}); nothing was recorded, and a resume asks the model again",
                run_id=run_id,
            )
        if call.id in seen:
            raise ProtocolError(
                f"the model sent call id {call.id!r} twice in one turn", run_id=run_id
            )
        if state.knows_call(call.id):
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
