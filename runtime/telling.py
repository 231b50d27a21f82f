"""One record, told: the label and lines ``show`` prints for it, and its ``--json`` event.

Pure (no I/O). Every value a record holds is clipped and escaped (``terminal.clip``): a tool's
result or a model's text must not drive the operator's terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime import records as R
from runtime.messages import AssistantTurn
from runtime.records import Record
from runtime.state import CallState, RunState
from runtime.stops import uncounted, wall_iso
from runtime.terminal import clip

__all__ = ["Event", "event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One record of the run, told: a label, a headline and detail lines."""

    seq: int
    at_ms: int
    kind: str
    key: str
    call_id: str | None
    label: str
    lines: tuple[str, ...]
    payload: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at_ms": self.at_ms,
            "kind": self.kind,
            "key": self.key,
            "call_id": self.call_id,
            "summary": self.lines[0],
            "payload": self.payload,
        }


def event(state: RunState, record: Record) -> Event | None:
    """``record`` of the run folded in ``state``, told; ``None`` for the header."""
    kind, p = record.kind, record.payload
    if kind == "header":
        return None
    call_id = p.get("call_id") if isinstance(p, Mapping) else None
    if not isinstance(call_id, str):
        call_id = None
    label, lines = _tell(state, record)
    return Event(record.seq, record.created_ms, kind, record.key, call_id, label, lines, p)


def _tell(state: RunState, record: Record) -> tuple[str, tuple[str, ...]]:
    kind, p = record.kind, record.payload
    if not isinstance(p, Mapping):
        return kind, (f"{record.key} {clip(p)}",)
    if kind == R.START:
        spec = f" (spec {p['spec']})" if p.get("spec") else ""
        return "start", (f"input {clip(p.get('input'))}", f"agent {p.get('agent')}{spec}")
    if kind == R.TURN:
        return f"turn {p.get('n')}", _tell_turn(p)
    if kind == R.ATTEMPT:
        return "attempt", (
            f"{_who(p)} [{p.get('safety')}] attempt {p.get('attempt')} marked: "
            "the call is about to leave the process",
        )
    if kind == R.RESULT:
        return _tell_result(state, p)
    if kind == R.HANDLE:
        flight = " (a request in flight)" if p.get("in_flight") else ""
        return "step", (
            f"{_who(p)} attempt {p.get('attempt')} step {p.get('n')}{flight}: "
            f"{clip(p.get('handle'), 240)}",
        )
    if kind == R.LATE:
        return "late", (
            f"{_who(p)} attempt {p.get('attempt')} returned after it was resolved "
            f"not executed: {_outcome(p)}",
        )
    if kind == R.HALT:
        return "halt", (f"{_who_call(state, p)} attempt {p.get('attempt')}: {p.get('cause')}",)
    if kind == R.STOP:
        return "stop", (
            f"the drive stopped short of an end: {p.get('message')}",
            f"to continue: {p.get('remedy')}",
        )
    if kind == R.CANCEL:
        by = f" by {p['by']}" if p.get("by") else ""
        reason = f": {clip(p['reason'])}" if p.get("reason") else ""
        return "cancel", (f"cancel requested{by}{reason}",)
    if kind == R.END:
        status = p.get("status")
        if status == "completed":
            return "end", (f"completed: {clip(p.get('output'))}",)
        if status == "failed":
            return "end", (f"failed: {clip(p.get('error'))}",)
        return "end", (str(status),)
    if kind == R.HISTORY:
        return "history", (
            f"turns {p.get('first')} to {p.get('last')} kept in one record, to resume from",
        )
    if kind == R.INTERRUPT:
        return "question", (f"{_who_call(state, p)} asks {clip(p.get('prompt'))} ({p.get('key')})",)
    if kind in (R.WAIT, R.RECEIVED, R.SIGNAL):
        return _tell_wait(state, record)
    told = _tell_person(state, record)
    if told is not None:
        return told
    rest = {k: v for k, v in p.items() if k != "call_id"}
    subject = f"{_who_call(state, p)} " if "call_id" in p else ""
    return kind, (f"{subject}{clip(rest)}",)


def _tell_turn(p: Mapping[str, Any]) -> tuple[str, ...]:
    turn = AssistantTurn.from_json(p.get("turn") or {})
    plans = p.get("plan") or {}
    if not turn.tool_calls:
        return (f"answers {clip(turn.text)}",)
    n = len(turn.tool_calls)
    lines = [f"asks for {n} tool call{'s' if n != 1 else ''}"]
    if turn.text:
        lines.append(f"says {clip(turn.text)}")
    for call in turn.tool_calls:
        plan = plans.get(call.id) or {}
        if plan.get("unknown"):
            how = "unknown tool"
        else:
            how = str(plan.get("safety"))
            if plan.get("approval"):
                how += ", needs approval"
        lines.append(f"{call.id} {call.name} [{how}] {clip(call.arguments, 80)}")
    return tuple(lines)


def _tell_result(state: RunState, p: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    resolved = p.get("resolved")
    if not resolved:
        return "result", (f"{_who(p)} {_outcome(p)}",)
    said = {"value": "succeeded", "error": "failed", "not_executed": "not executed"}
    outcome = p.get("outcome")
    head = f"{_who(p)} attempt {p.get('attempt')}: {said.get(str(outcome), outcome)}"
    if outcome == "not_executed":
        head += " (the call may be attempted again)"
    else:
        head += f" {_outcome(p)}"
    by = resolved.get("by") if isinstance(resolved, Mapping) else None
    evidence = resolved.get("evidence") if isinstance(resolved, Mapping) else None
    detail = f"by {by or 'someone unnamed'}"
    if evidence:
        detail += f"; evidence: {clip(evidence)}"
    return "resolved", (head, detail)


def _tell_person(state: RunState, record: Record) -> tuple[str, tuple[str, ...]] | None:
    """An approval decision, the gate's tally, or an answer; ``None`` if shaped otherwise."""
    kind, p = record.kind, record.payload
    who = _who_call(state, p)
    if kind == R.DECISION and isinstance(d := p.get("decision"), Mapping):
        said = "approved" if d.get("approve") else "denied"
        signed = " (signed)" if d.get("signature") else ""
        line = f"{who} {said} by {d.get('approver')}{signed}"
        call = state.calls.get(str(p.get("call_id")))
        why = uncounted(state, call).get(record.seq) if call is not None else None
        if why is not None:
            line += f", not counted: {why}"
        return "decision", (line,)
    if kind == R.TALLY and isinstance(t := p.get("tally"), Mapping):
        approvals, denials = t.get("approvals") or [], t.get("denials") or []
        line = f"{who} gate {t.get('outcome')}: {len(approvals)} of {t.get('need')} approvals"
        if approvals:
            line += f" ({', '.join(map(str, approvals))})"
        if denials:
            line += f", denied by {', '.join(map(str, denials))}"
        return "gate", (line,)
    if kind == R.ANSWER and "value" in p:
        by = f" by {p['by']}" if p.get("by") else ""
        return "answer", (f"{who} {p.get('key')} = {clip(p.get('value'))}{by}",)
    return None


def _tell_wait(state: RunState, record: Record) -> tuple[str, tuple[str, ...]]:
    """A tool's wait (a sleep, a receive), what a receive was given, a signal sent."""
    kind, p = record.kind, record.payload
    at = p.get("at_ms")
    until = f" until {wall_iso(at)}" if isinstance(at, int) else ""
    if kind == R.SIGNAL:
        by = f" by {p['by']}" if p.get("by") else ""
        return "signal", (f"{p.get('name')} = {clip(p.get('value'))}{by} ({p.get('signal_id')})",)
    who = _who_call(state, p)
    if kind == R.RECEIVED:
        if p.get("timed_out"):
            return "received", (f"{who} wait {p.get('n')}: its timeout came, no signal",)
        given = str(p.get("signal", "")).rpartition("/")[2]
        return "received", (f"{who} wait {p.get('n')}: given signal {given}",)
    if p.get("what") == "receive":
        return "wait", (f"{who} wait {p.get('n')}: receives {p.get('name')}{until}",)
    return "wait", (f"{who} wait {p.get('n')}: sleeps{until}",)


def _outcome(p: Mapping[str, Any]) -> str:
    if p.get("outcome") == "value":
        return f"-> {clip(p.get('value'))}"
    error = p.get("error")
    if isinstance(error, Mapping):
        return f"-> error {error.get('type')}: {clip(error.get('message'))}"
    return f"-> {p.get('outcome')}"


def _who(p: Mapping[str, Any]) -> str:
    return f"{p.get('call_id')} {p.get('tool')}"


def _who_call(state: RunState, p: Mapping[str, Any]) -> str:
    call: CallState | None = state.calls.get(str(p.get("call_id")))
    return f"{p.get('call_id')} {call.call.name if call is not None else '?'}"
