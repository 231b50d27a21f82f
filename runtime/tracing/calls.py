"""Spans of tool calls (``execute_tool {tool}``) and of resolutions (``resolve {tool}``), with
what the journal made of each call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from runtime.result import Halt, Waiting
from runtime.tracing._core import (
    NO_DRIVE,
    NO_SPAN,
    active_tracer,
    drive_span,
    json_text,
    settings,
    started,
    tool_span,
)
from runtime.tracing.runs import linked_context

__all__ = [
    "approval_decided",
    "call_ended",
    "marker_written",
    "recorded",
    "resolved",
    "tool_call",
    "tool_retry",
]


def tool_call(
    call_id: str, tool: str, plan: Mapping[str, Any], arguments: Any
) -> AbstractContextManager[None]:
    """The span of one tool call: ``execute_tool {tool}``, with what the journal made of it."""
    if drive_span.get() is NO_DRIVE:
        return NO_SPAN
    return _tool_call(call_id, tool, plan, arguments)


@contextmanager
def _tool_call(call_id: str, tool: str, plan: Mapping[str, Any], arguments: Any) -> Iterator[None]:
    with started(settings.tracer, f"execute_tool {tool}", SpanKind.INTERNAL) as span:
        if not span.is_recording():
            yield
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        safety = plan.get("safety")
        if isinstance(safety, str):
            attributes["bide.tool.safety"] = safety
        if settings.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json_text(arguments)
        span.set_attributes(attributes)
        token = tool_span.set(span)
        try:
            yield
        finally:
            tool_span.reset(token)


def marker_written(attempt: int) -> None:
    """A side effect's attempt marker is committed: its outcome is now journaled or unknown."""
    span = tool_span.get()
    if span.is_recording():
        span.set_attribute("bide.tool.safety", "side_effect")
        span.add_event("attempt_marker_written", {"bide.attempt": attempt})


def tool_retry(attempt: int, delay: float, error_type: str) -> None:
    """A retry-safe call failed and runs again after ``delay`` seconds."""
    span = tool_span.get()
    if span.is_recording():
        span.add_event(
            "retry",
            {"bide.retry.attempt": attempt, "bide.retry.delay_s": delay, "error.type": error_type},
        )


def recorded(payload: Mapping[str, Any], *, won: bool) -> None:
    """The call's result record; ``won`` is False when the journal already held one (replayed)."""
    span = tool_span.get()
    if not span.is_recording():
        return
    winner = payload
    attributes: dict[str, Any] = {"bide.attempt": int(winner.get("attempt") or 1)}
    safety = winner.get("safety")
    if isinstance(safety, str):
        attributes["bide.tool.safety"] = safety
    outcome = str(winner.get("outcome"))
    attributes["bide.tool.outcome"] = outcome
    if not won:
        attributes["bide.replayed"] = True
        span.add_event("replayed", {"bide.tool.outcome": outcome})
    if outcome == "error":
        error = winner.get("error") or {}
        kind = error.get("type") if isinstance(error, Mapping) else None
        attributes["error.type"] = str(kind or "error")
        span.set_status(Status(StatusCode.ERROR))
    if settings.capture_content:
        key = "value" if outcome == "value" else "error"
        attributes["gen_ai.tool.call.result"] = json_text(winner.get(key))
    span.set_attributes(attributes)


def call_ended(outcome: object) -> None:
    """What a call's drive came to when it did not record a result: a halt or a wait."""
    span = tool_span.get()
    if not span.is_recording():
        return
    if isinstance(outcome, Halt):
        span.add_event(
            "halted", {"bide.halt.cause": outcome.cause, "error.type": "outcome_unknown"}
        )
        span.set_attribute("bide.halted", True)
        span.set_status(Status(StatusCode.ERROR, "halted: the outcome is unknown"))
    elif isinstance(outcome, Waiting):
        attributes: dict[str, Any] = {"bide.waiting.kind": outcome.kind}
        if outcome.key is not None:
            attributes["bide.waiting.key"] = outcome.key
        if outcome.prompt is not None and settings.capture_content:
            attributes["bide.waiting.prompt"] = outcome.prompt
        span.add_event("waiting", attributes)
        span.set_attribute("bide.waiting", outcome.kind)


def approval_decided(outcome: str, *, replayed: bool) -> None:
    """The approval gate's terminal tally, taken now or from the journal."""
    span = tool_span.get()
    if span.is_recording():
        span.add_event("approval", {"bide.approval.outcome": outcome, "bide.replayed": replayed})


# --- resolutions ---------------------------------------------------------------------------


def resolved(
    *,
    run_id: str,
    call_id: str,
    tool: str,
    outcome: str,
    by: str | None,
    start: Mapping[str, Any] | None,
    value: Any = None,
    started_ns: int | None = None,
) -> None:
    """A halted call was resolved: a ``resolve {tool}`` span linked to the run's first drive."""
    tracer = active_tracer()
    if tracer is None:
        return
    first = linked_context(start)
    links = [Link(first, {"bide.link": "first_drive"})] if first is not None else None
    span = tracer.start_span(
        f"resolve {tool}", kind=SpanKind.INTERNAL, links=links, start_time=started_ns
    )
    try:
        if not span.is_recording():
            return
        attributes: dict[str, Any] = {
            "bide.run.id": run_id,
            "gen_ai.conversation.id": run_id,
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "bide.resolution.outcome": outcome,
        }
        if by is not None:
            attributes["bide.resolution.by"] = by
        span.set_attributes(attributes)
        event: dict[str, Any] = {"bide.resolution.outcome": outcome}
        if by is not None:
            event["bide.resolution.by"] = by
        if settings.capture_content and outcome == "value":
            event["gen_ai.tool.call.result"] = json_text(value)
        span.add_event("resolved", event)
    finally:
        span.end()
