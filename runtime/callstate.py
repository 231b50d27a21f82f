"""One call's state within a run, folded from its records: asked, attempted, answered, halted,
decided, resolved. ``runtime.state.RunState`` holds one per call (and re-exports it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime import records as R
from runtime.approval import Decision
from runtime.errors import ProtocolError
from runtime.messages import ToolCall
from runtime.records import Record

__all__ = ["CallState", "acted"]


@dataclass(slots=True)
class CallState:
    """Everything recorded about one tool call, by attempt."""

    call: ToolCall
    turn: int
    plan: Mapping[str, Any]
    """The tool's safety and approval when the turn was recorded (for status without the agent)."""
    markers: dict[int, Record] = field(default_factory=dict)
    results: dict[int, Record] = field(default_factory=dict)
    late: dict[int, Record] = field(default_factory=dict)
    halts: dict[int, Record] = field(default_factory=dict)
    """Why a drive halted on an attempt (the exception), journaled as evidence."""
    handles: dict[int, dict[int, Record]] = field(default_factory=dict)
    """The steps of progress the tool journaled mid-attempt (``records.Handle``), by attempt
    and then by step."""
    decisions: list[Record] = field(default_factory=list)
    tallies: dict[str, Record] = field(default_factory=dict)
    """Terminal tallies of the approval gate, by the digest of the policy they were made under."""
    interrupts: dict[str, Record] = field(default_factory=dict)
    answers: dict[str, Record] = field(default_factory=dict)
    waits: dict[int, Record] = field(default_factory=dict)
    """The tool's waits (``ToolContext.sleep``, ``receive``), by their place among its waits."""
    received: dict[int, Record] = field(default_factory=dict)
    """What each of its receives was given (a signal, or its timeout), by the same place."""
    reconciles: dict[int, list[Record]] = field(default_factory=dict)
    """Inconclusive reconciler tries, by attempt, in order (a conclusion is the result)."""

    @property
    def last_reconcile(self) -> Record | None:
        """The latest inconclusive reconciler try on the current attempt, if any."""
        tries = self.reconciles.get(self.attempt)
        return max(tries, key=lambda r: r.seq) if tries else None

    @property
    def attempt(self) -> int:
        """The current attempt: one more than the attempts resolved "not executed"."""
        k = 1
        while (r := self.results.get(k)) is not None and r.payload.get("outcome") == "not_executed":
            if k in self.late:
                return k
            k += 1
        return k

    @property
    def result(self) -> Record | None:
        """The record holding the call's outcome (value or error), if it has one."""
        k = self.attempt
        if k in self.late:
            return self.late[k]
        return self.results.get(k)

    @property
    def marker(self) -> Record | None:
        """The current attempt's marker, if a side effect was attempted."""
        return self.markers.get(self.attempt)

    @property
    def halt_cause(self) -> str | None:
        """Why the drive that made the current attempt halted on it, if it said."""
        record = self.halts.get(self.attempt)
        cause = record.payload.get("cause") if record is not None else None
        return cause if isinstance(cause, str) else None

    @property
    def _last_handle(self) -> Record | None:
        steps = self.handles.get(self.attempt)
        if not steps or self.marker is None:
            return None
        return steps[max(steps)]

    @property
    def handle(self) -> R.Handle | None:
        """The latest step the current attempt journaled, if it was attempted and journaled one."""
        record = self._last_handle
        return R.Handle.from_payload(record.payload) if record is not None else None

    @property
    def unknown_outcome(self) -> bool:
        """Attempted, no result: the call may have acted. A resume halts on it, unless it is
        ``resumable`` (then it continues the attempt through its handle). Either way only a
        result or a resolution settles it."""
        return self.marker is not None and self.result is None

    @property
    def resumable(self) -> bool:
        """Attempted, no result, and its latest step journaled a handle (not a request in
        flight) with no halt since: its outcome is knowable, so the run is not halted on it; a
        resume asks the tool to continue it. A halt after the step (the drive could not learn
        the outcome) makes it halted until a resume tries again."""
        record = self._last_handle
        if not self.unknown_outcome or record is None or record.payload.get("in_flight") is True:
            return False
        halt = self.halts.get(self.attempt)
        return halt is None or halt.seq < record.seq

    @property
    def halted(self) -> bool:
        """Attempted, no result, and not resumable: the run halts on it."""
        return self.unknown_outcome and not self.resumable

    def decisions_made(self) -> list[tuple[Decision, str]]:
        """The approval decisions journaled for this call, in order, with their policy digest."""
        ordered = sorted(self.decisions, key=lambda r: r.seq)
        return [
            (Decision.from_json(r.payload["decision"]), str(r.payload["policy"])) for r in ordered
        ]

    @property
    def last_resolution(self) -> Record | None:
        resolved = [r for r in self.results.values() if r.payload.get("resolved")]
        return max(resolved, key=lambda r: r.seq) if resolved else None

    def message_content(self) -> tuple[Any, bool]:
        """What the model sees of this call's result: (content, is_error)."""
        record = self.result
        if record is None:
            raise ProtocolError(f"call {self.call.id} has no result yet", call_id=self.call.id)
        payload = record.payload
        if payload.get("outcome") == "value":
            return payload.get("value"), False
        return payload.get("error"), True


def acted(call: CallState, attempt: int) -> bool:
    """Whether the side effect's attempt is known to have run to an outcome."""
    if attempt in call.late:
        return True
    result = call.results.get(attempt)
    return result is not None and result.payload.get("outcome") != "not_executed"
