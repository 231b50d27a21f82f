"""One event as one line of text, for a terminal (``show --follow``). Pure; every value is
clipped and escaped (``terminal.clip``), as ``show`` does."""

from __future__ import annotations

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
    TextDelta,
    ToolCallAsked,
    ToolResult,
    TurnRecorded,
    TurnStarted,
    Waiting,
)
from runtime.terminal import clip

__all__ = ["line"]


def line(event: Event) -> str:
    """``[cursor] type  what happened`` (``[live]`` for a live-only event)."""
    where = f"[{event.cursor}]" if event.cursor is not None else "[live]"
    return f"{where} {event.type}  {_said(event)}"


def _said(e: Event) -> str:
    if isinstance(e, RunStarted):
        parent = f" (child of {clip(e.parent)})" if e.parent else ""
        return f"input {clip(e.input)}, agent {clip(e.agent)}{parent}"
    if isinstance(e, TurnStarted):
        return f"turn {e.n}: asking the model"
    if isinstance(e, TextDelta):
        return clip(e.text)
    if isinstance(e, TurnRecorded):
        said = f" says {clip(e.text)}" if e.text else ""
        return f"turn {e.n}: {e.calls} tool call{'s' if e.calls != 1 else ''}{said}"
    if isinstance(e, ToolCallAsked):
        gate = ", needs approval" if e.gated else ""
        return f"{e.call_id} {clip(e.tool)} [{e.safety}{gate}] {clip(e.arguments, 80)}"
    if isinstance(e, AttemptMarked):
        return f"{e.call_id} {clip(e.tool)} attempt {e.attempt}: about to leave the process"
    if isinstance(e, ToolResult):
        return f"{e.call_id} {clip(e.tool)} -> {_outcome(e.outcome, e.value, e.error)}"
    if isinstance(e, Resolved):
        by = f" by {clip(e.by)}" if e.by else ""
        return f"{e.call_id} {clip(e.tool)} attempt {e.attempt} resolved {e.outcome}{by}"
    if isinstance(e, Halted):
        return f"{e.call_id} attempt {e.attempt}: {clip(e.cause)}"
    if isinstance(e, Waiting):
        what = "an approval" if e.kind == "approval" else f"an answer to {clip(e.prompt)}"
        return f"{e.call_id} waits for {what}"
    if isinstance(e, DecisionMade):
        return f"{e.call_id} {'approved' if e.approve else 'denied'} by {clip(e.approver)}"
    if isinstance(e, AnswerGiven):
        return f"{e.call_id} {clip(e.key)} = {clip(e.value)}"
    if isinstance(e, CancelRequested):
        return f"cancel requested by {clip(e.by or 'someone unnamed')}"
    if isinstance(e, Stopped):
        return f"stopped short of an end: {clip(e.message)}"
    if isinstance(e, Ended):
        return f"{e.status}: {clip(e.output if e.status == 'completed' else e.error)}"
    if isinstance(e, ChildStarted):
        return f"{e.call_id} drives child run {clip(e.child_run)}"
    if isinstance(e, ChildEnded):
        return f"{e.call_id} child run {clip(e.child_run)} answered {clip(e.output)}"
    assert isinstance(e, Noted)
    return f"{e.kind} {clip(e.key)}"


def _outcome(outcome: str, value: object, error: object) -> str:
    if outcome == "value":
        return clip(value)
    return f"error {clip(error)}"
