"""The typed events of a run, and how each journal record becomes events. Pure (no I/O).

A journaled event carries ``cursor``, a string: the ``seq`` of the record it was read from (the
records of a run are in commit order, so "every event after cursor c" is "every record with
seq > c"). One record may give several events (a turn: the turn, then each call it asks for):
all but the last carry ``"<seq>.<i>"`` (``i`` its place among them, from 0), the last ``"<seq>"``,
so a consumer resuming after any of them gets exactly the ones it has not seen (``Cursor``).
A live event (``TurnStarted``,
``TextDelta``) is never journaled: its ``cursor`` is ``None``, and a consumer that was away when it
happened does not get it back; the journaled ``TurnRecorded`` holds the whole text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from runtime.errors import ConfigError

__all__ = [
    "AnswerGiven",
    "AttemptMarked",
    "CancelRequested",
    "ChildEnded",
    "ChildStarted",
    "Cursor",
    "DecisionMade",
    "Ended",
    "Event",
    "Halted",
    "Noted",
    "Resolved",
    "RunStarted",
    "Stopped",
    "TextDelta",
    "ToolCallAsked",
    "ToolResult",
    "TurnRecorded",
    "TurnStarted",
    "Waiting",
]


@dataclass(frozen=True, slots=True)
class _Event:
    type: ClassVar[str] = "event"
    run_id: str
    cursor: str | None
    """Where this event is in the run (``"<seq>"`` or ``"<seq>.<i>"``, see the module's
    docstring): give it back as ``after`` to resume after it. ``None`` for a live-only event."""
    at_ms: int | None
    """When its record was committed (the journal's time); ``None`` for a live-only event."""

    @property
    def live(self) -> bool:
        """True for an event that is never journaled (a consumer away at the time misses it)."""
        return self.cursor is None

    def to_json(self) -> dict[str, Any]:
        """The event as JSON: ``type``, then its fields (what the console's stream sends)."""
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclass(frozen=True, slots=True)
class RunStarted(_Event):
    type: ClassVar[str] = "run_started"
    input: Any
    agent: str | None
    parent: str | None = None
    """The run this one is a child of, if it is one."""


@dataclass(frozen=True, slots=True)
class TurnStarted(_Event):
    """Live only: the drive asked the model for turn ``n``."""

    type: ClassVar[str] = "turn_started"
    n: int


@dataclass(frozen=True, slots=True)
class TextDelta(_Event):
    """Live only: a piece of turn ``n``'s text as the model streams it (``TurnRecorded`` holds
    the whole text once the turn is journaled)."""

    type: ClassVar[str] = "text_delta"
    n: int
    text: str


@dataclass(frozen=True, slots=True)
class TurnRecorded(_Event):
    type: ClassVar[str] = "turn"
    n: int
    text: str | None
    calls: int
    usage: Any


@dataclass(frozen=True, slots=True)
class ToolCallAsked(_Event):
    type: ClassVar[str] = "tool_call"
    n: int
    call_id: str
    tool: str
    arguments: Any
    safety: str | None
    gated: bool
    """The call waits for an approval before it runs."""


@dataclass(frozen=True, slots=True)
class AttemptMarked(_Event):
    """A side effect's attempt is about to leave the process (its marker is committed)."""

    type: ClassVar[str] = "attempt"
    call_id: str
    tool: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ToolResult(_Event):
    type: ClassVar[str] = "result"
    call_id: str
    tool: str
    attempt: int | None
    outcome: str
    value: Any
    error: Any


@dataclass(frozen=True, slots=True)
class Resolved(_Event):
    """A halted call's outcome, said by a reconciler or a person."""

    type: ClassVar[str] = "resolution"
    call_id: str
    tool: str
    attempt: int | None
    outcome: str
    by: str | None
    evidence: str | None
    value: Any
    error: Any


@dataclass(frozen=True, slots=True)
class Halted(_Event):
    """A side effect's outcome is unknown: the run halts on it until it is resolved."""

    type: ClassVar[str] = "halt"
    call_id: str
    attempt: int | None
    cause: str


@dataclass(frozen=True, slots=True)
class Waiting(_Event):
    """A call waits for a person: an approval (``kind`` "approval") or an answer ("input")."""

    type: ClassVar[str] = "waiting"
    call_id: str
    kind: str
    key: str | None
    prompt: Any


@dataclass(frozen=True, slots=True)
class DecisionMade(_Event):
    type: ClassVar[str] = "decision"
    call_id: str
    approver: str | None
    approve: bool


@dataclass(frozen=True, slots=True)
class AnswerGiven(_Event):
    type: ClassVar[str] = "answer"
    call_id: str
    key: str | None
    value: Any
    by: str | None


@dataclass(frozen=True, slots=True)
class CancelRequested(_Event):
    type: ClassVar[str] = "cancel"
    by: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class Stopped(_Event):
    """A drive stopped short of an end (a budget reached, the model unavailable)."""

    type: ClassVar[str] = "stop"
    reason: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class Ended(_Event):
    type: ClassVar[str] = "end"
    status: str
    output: Any
    error: Any


@dataclass(frozen=True, slots=True)
class ChildStarted(_Event):
    """A call of a child agent (``Agent.as_tool``) journaled its child run's id before driving
    it (a child that may act; a retry-safe child shows only as its ``ChildEnded``)."""

    type: ClassVar[str] = "child_started"
    call_id: str
    child_run: str


@dataclass(frozen=True, slots=True)
class ChildEnded(_Event):
    """A call of a child agent got its child run's output (after the call's ``result``)."""

    type: ClassVar[str] = "child_ended"
    call_id: str
    child_run: str
    output: Any


@dataclass(frozen=True, slots=True)
class Noted(_Event):
    """Any other record (a late result, a gate's tally, a progress handle, a reconciler's
    inconclusive try): its kind and key, so a consumer's cursor passes it knowingly."""

    type: ClassVar[str] = "noted"
    kind: str
    key: str
    call_id: str | None


Event = (
    RunStarted
    | TurnStarted
    | TextDelta
    | TurnRecorded
    | ToolCallAsked
    | AttemptMarked
    | ToolResult
    | Resolved
    | Halted
    | Waiting
    | DecisionMade
    | AnswerGiven
    | CancelRequested
    | Stopped
    | Ended
    | ChildStarted
    | ChildEnded
    | Noted
)
"""Every event a run's stream yields."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """A position in a run's events: after record ``seq``, or (``part`` given) after event
    ``part`` of record ``seq`` (its later events still to come)."""

    seq: int
    part: int | None = None

    @classmethod
    def parse(cls, given: int | str) -> Cursor:
        """``ConfigError`` unless ``given`` is a cursor: ``n``, ``"n"`` or ``"n.i"``."""
        if isinstance(given, int) and not isinstance(given, bool) and given >= 0:
            return cls(given)
        if isinstance(given, str) and 0 < len(given) <= 40:
            seq, dot, part = given.partition(".")
            if seq.isascii() and seq.isdigit() and (not dot or (part.isascii() and part.isdigit())):
                return cls(int(seq), int(part) if dot else None)
        raise ConfigError(
            f"a cursor is a non-negative integer or a string 'SEQ' or 'SEQ.I' (an event's "
            f"cursor), not {given!r}"
        )

    def __str__(self) -> str:
        return str(self.seq) if self.part is None else f"{self.seq}.{self.part}"
