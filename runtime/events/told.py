"""What each record of a run tells, as events (``from_record``): one per record, or several for
a turn and its calls, each with its cursor; none for the format header or a history chunk."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from runtime import records as R
from runtime.events.types import (
    AnswerGiven,
    AttemptMarked,
    CancelRequested,
    ChildEnded,
    ChildStarted,
    DecisionMade,
    Ended,
    Event,
    Halted,
    Noted,
    Resolved,
    RunStarted,
    Stopped,
    ToolCallAsked,
    ToolResult,
    TurnRecorded,
    Waiting,
)
from runtime.messages import AssistantTurn
from runtime.records import Record

__all__ = ["from_record"]

_SKIPPED = frozenset({"header", R.HISTORY})
"""Records that tell nothing new: the format header, and history chunks (derived from the
records before them)."""


def from_record(record: Record) -> list[Event]:
    """The events ``record`` gives, in order (none for a header or a history chunk), each with
    its cursor."""
    told = list(_told(record))
    last = len(told) - 1
    return [
        dataclasses.replace(e, cursor=str(record.seq) if i == last else f"{record.seq}.{i}")
        for i, e in enumerate(told)
    ]


def _told(record: Record) -> Iterator[Event]:
    kind, p = record.kind, record.payload
    if kind in _SKIPPED:
        return
    base = (record.run_id, str(record.seq), record.created_ms)
    if not isinstance(p, Mapping):
        yield Noted(*base, kind=kind, key=record.key, call_id=None)
        return
    call_id = p.get("call_id")
    cid = call_id if isinstance(call_id, str) else ""
    if kind == R.START:
        parent = p.get("parent")
        yield RunStarted(
            *base,
            input=p.get("input"),
            agent=_text(p.get("agent")),
            parent=parent.get("run_id") if isinstance(parent, Mapping) else None,
        )
    elif kind == R.TURN:
        yield from _turn(base, p)
    elif kind == R.ATTEMPT:
        yield AttemptMarked(*base, call_id=cid, tool=str(p.get("tool")), attempt=_int(p, "attempt"))
    elif kind == R.RESULT:
        resolved = p.get("resolved")
        attempt = p.get("attempt") if isinstance(p.get("attempt"), int) else None
        tool, outcome = str(p.get("tool")), str(p.get("outcome"))
        value, error = p.get("value"), p.get("error")
        if isinstance(resolved, Mapping):
            yield Resolved(
                *base,
                call_id=cid,
                tool=tool,
                attempt=attempt,
                outcome=outcome,
                by=_text(resolved.get("by")),
                evidence=_text(resolved.get("evidence")),
                value=value,
                error=error,
            )
        else:
            yield ToolResult(
                *base,
                call_id=cid,
                tool=tool,
                attempt=attempt,
                outcome=outcome,
                value=value,
                error=error,
            )
        if isinstance(value, Mapping) and isinstance(child := value.get("child_run"), str):
            yield ChildEnded(*base, call_id=cid, child_run=child, output=value.get("output"))
    elif kind == R.HALT:
        attempt = p.get("attempt")
        yield Halted(
            *base,
            call_id=cid,
            attempt=attempt if isinstance(attempt, int) else None,
            cause=str(p.get("cause")),
        )
    elif kind == R.INTERRUPT:
        yield Waiting(
            *base, call_id=cid, kind="input", key=_text(p.get("key")), prompt=p.get("prompt")
        )
    elif kind == R.ANSWER:
        yield AnswerGiven(
            *base, call_id=cid, key=_text(p.get("key")), value=p.get("value"), by=_text(p.get("by"))
        )
    elif kind == R.DECISION and isinstance(d := p.get("decision"), Mapping):
        yield DecisionMade(
            *base, call_id=cid, approver=_text(d.get("approver")), approve=d.get("approve") is True
        )
    elif kind == R.CANCEL:
        yield CancelRequested(*base, by=_text(p.get("by")), reason=_text(p.get("reason")))
    elif (
        kind == R.HANDLE
        and isinstance(h := p.get("handle"), Mapping)
        and isinstance(child := h.get("child_run"), str)
    ):
        yield ChildStarted(*base, call_id=cid, child_run=child)
    elif kind == R.STOP:
        yield Stopped(*base, reason=_text(p.get("reason")), message=_text(p.get("message")))
    elif kind == R.END:
        yield Ended(
            *base, status=str(p.get("status")), output=p.get("output"), error=p.get("error")
        )
    else:
        yield Noted(*base, kind=kind, key=record.key, call_id=call_id if call_id else None)


def _turn(base: tuple[str, str, int], p: Mapping[str, Any]) -> Iterator[Event]:
    n = _int(p, "n")
    turn = AssistantTurn.from_json(p.get("turn") or {})
    plans = p.get("plan") or {}
    yield TurnRecorded(
        *base, n=n, text=turn.text, calls=len(turn.tool_calls), usage=turn.usage.to_json()
    )
    for call in turn.tool_calls:
        plan = plans.get(call.id) if isinstance(plans, Mapping) else None
        plan = plan if isinstance(plan, Mapping) else {}
        gated = bool(plan.get("approval"))
        yield ToolCallAsked(
            *base,
            n=n,
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            safety=_text(plan.get("safety")),
            gated=gated,
        )
        if gated:
            yield Waiting(*base, call_id=call.id, kind="approval", key=None, prompt=None)


def _int(p: Mapping[str, Any], name: str) -> int:
    value = p.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
