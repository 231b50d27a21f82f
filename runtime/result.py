"""What a drive returns: the run's status and, when it stopped short, what it stopped on."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runtime.messages import Usage

__all__ = ["Halt", "RunResult", "RunStatus", "Waiting"]

OutputT = TypeVar("OutputT")


class RunStatus(enum.StrEnum):
    """A run's status, derived from its journal. CLI exit codes in parentheses."""

    RUNNING = "running"  # not finished; resume continues it
    SUBMITTED = "submitted"  # (0) started durably, not driven yet: a worker or resume drives it
    WAITING = "waiting"  # (3) an approval or an answer is needed
    HALTED = "halted"  # (4) a side effect's outcome is unknown; resolve it, then resume
    COMPLETED = "completed"  # (0)
    FAILED = "failed"  # (1)
    CANCELLED = "cancelled"  # (5)

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class Halt:
    """A side effect whose outcome is unknown: it may have acted; its result was not recorded."""

    call_id: str
    tool: str
    arguments: Any
    attempted_at_ms: int | None
    cause: str
    attempt: int | None = None
    """The attempt it halted on (a resolution names it from the call's second attempt on)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "attempt": self.attempt,
            "attempted_at_ms": self.attempted_at_ms,
            "cause": self.cause,
        }


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a waiting run needs: an approval decision, a person's answer, its timer to come due
    (``ToolContext.sleep``) or a signal (``ToolContext.receive``)."""

    kind: str  # "approval", "input", "timer" or "signal"
    call_id: str
    tool: str
    arguments: Any
    prompt: str | None = None
    key: str | None = None
    schema: Any = None
    policy: Any = None
    tally: Any = None
    due_ms: int | None = None
    """When the wait ends by itself (a timer, a receive's timeout), on the journal's clock."""
    at: str | None = None
    """That time on the wall clock, as ISO 8601 UTC: for people to read, never to decide."""
    name: str | None = None
    """The signal a receive waits for."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "kind": self.kind,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
        }
        for name in ("prompt", "key", "schema", "policy", "tally", "due_ms", "at", "name"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """The outcome of one drive of a run. ``output`` is the answer of a completed run: its
    text, or the validated value of the agent's ``output_type`` (``Agent[OutputT]``)."""

    run_id: str
    status: RunStatus
    output: OutputT | None = None
    halts: tuple[Halt, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    error: str | None = None

    @property
    def halt(self) -> Halt | None:
        """The first halted call, when the run is halted."""
        return self.halts[0] if self.halts else None

    output_json: Any = None
    """The output as JSON data, as the end record holds it (the text of an untyped run)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status.value,
            "output": self.output if self.output_json is None else self.output_json,
            "halts": [h.to_json() for h in self.halts],
            "waiting": [w.to_json() for w in self.waiting],
            "usage": self.usage.to_json(),
            "turns": self.turns,
            "error": self.error,
        }
