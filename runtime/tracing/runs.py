"""Spans of drives and of model requests: ``invoke_agent {agent}`` and ``chat {model}``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from runtime.messages import AssistantTurn, Message
from runtime.result import RunResult, RunStatus
from runtime.tracing._core import (
    NO_DRIVE,
    NO_SPAN,
    TRACE_FIELD,
    W3C,
    DriveSpan,
    active_tracer,
    chat_span,
    drive_span,
    json_text,
    message,
    settings,
    started,
    text_message,
)

__all__ = [
    "answered",
    "chat",
    "drive",
    "drive_input",
    "finished",
    "journaled_context",
    "linked_context",
    "model_retry",
    "resumed",
    "stopped",
]


def drive(agent: str, run_id: str) -> AbstractContextManager[None]:
    """The span of one drive: ``invoke_agent {agent}``; the hooks below annotate it."""
    tracer = active_tracer()
    if tracer is None:
        return NO_SPAN
    return _drive(tracer, agent, run_id)


@contextmanager
def _drive(tracer: trace.Tracer, agent: str, run_id: str) -> Iterator[None]:
    with started(tracer, f"invoke_agent {agent}", SpanKind.INTERNAL) as span:
        if not span.is_recording():
            yield
            return
        span.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": run_id,
                "bide.run.id": run_id,
            }
        )
        token = drive_span.set(DriveSpan(span))
        try:
            yield
        finally:
            drive_span.reset(token)


def journaled_context() -> dict[str, Any]:
    """What the run's start record keeps of this drive's span, so later drives can link to it."""
    span = drive_span.get().span
    if not span.is_recording():
        return {}
    carrier: dict[str, str] = {}
    W3C.inject(carrier, context=trace.set_span_in_context(span))
    return {TRACE_FIELD: carrier} if carrier else {}


def drive_input(text: str) -> None:
    """The run's input on the drive span, when content capture is on."""
    span = drive_span.get().span
    if span.is_recording() and settings.capture_content:
        span.set_attribute("gen_ai.input.messages", json_text([text_message("user", text)]))


def resumed(start: Mapping[str, Any] | None, records: int, turns: int, replayed: int) -> None:
    """This drive resumes a run: link to its first drive and say what the journal held."""
    span = drive_span.get().span
    if not span.is_recording():
        return
    first = linked_context(start)
    if first is not None and first.span_id != span.get_span_context().span_id:
        span.add_link(first, {"bide.link": "first_drive"})
    span.set_attribute("bide.resumed", True)
    span.add_event(
        "resumed",
        {"bide.records": records, "bide.turns": turns, "bide.calls_replayed": replayed},
    )


def stopped(reason: str, remedy: str) -> None:
    """The drive journaled a stop short of an end (a budget reached, a model unavailable)."""
    span = drive_span.get().span
    if span.is_recording():
        span.add_event("stop", {"bide.stop.reason": reason, "bide.stop.remedy": remedy})


def finished(result: RunResult[Any]) -> None:
    """The drive returned ``result``; its usage is that of the model requests it made."""
    current = drive_span.get()
    span = current.span
    if not span.is_recording():
        return
    status = result.status
    span.set_attributes(
        {
            "bide.run.status": status.value,
            "bide.run.turns": result.turns,
            "gen_ai.usage.input_tokens": current.input_tokens,
            "gen_ai.usage.output_tokens": current.output_tokens,
        }
    )
    if status is RunStatus.HALTED:
        span.set_attribute("bide.halted_calls", [h.call_id for h in result.halts])
    if result.waiting:
        span.set_attribute("bide.waiting_calls", [w.call_id for w in result.waiting])
    if status is RunStatus.FAILED:
        span.set_status(Status(StatusCode.ERROR, "the run failed"))
    if settings.capture_content and result.output is not None:
        answer = result.to_json()["output"]  # a typed output as its JSON
        text = answer if isinstance(answer, str) else json_text(answer)
        output = [text_message("assistant", text)]
        span.set_attribute("gen_ai.output.messages", json_text(output))


def linked_context(start: Mapping[str, Any] | None) -> trace.SpanContext | None:
    carrier = (start or {}).get(TRACE_FIELD)
    if not isinstance(carrier, Mapping):
        return None
    headers = {str(k): v for k, v in carrier.items() if isinstance(v, str)}
    context = trace.get_current_span(W3C.extract(headers)).get_span_context()
    return context if context.is_valid else None


# --- model requests ------------------------------------------------------------------------


def chat(
    model: object, n: int, system_prompt: str | None, messages: Sequence[Message]
) -> AbstractContextManager[None]:
    """The span of one model request, retries included: ``chat {model}``."""
    if drive_span.get() is NO_DRIVE:  # not tracing this drive (no provider, or not sampled)
        return NO_SPAN
    return _chat(model, n, system_prompt, messages)


@contextmanager
def _chat(
    model: object, n: int, system_prompt: str | None, messages: Sequence[Message]
) -> Iterator[None]:
    name = getattr(model, "model", None)
    name = name if isinstance(name, str) and name else None
    with started(settings.tracer, f"chat {name}" if name else "chat", SpanKind.CLIENT) as span:
        if not span.is_recording():
            yield
            return
        provider = getattr(model, "provider_name", None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider if isinstance(provider, str) else type(model).__name__,
            "bide.turn": n,
        }
        if name:
            attributes["gen_ai.request.model"] = name
        if settings.capture_content:
            if system_prompt:
                attributes["gen_ai.system_instructions"] = json_text(
                    [{"type": "text", "content": system_prompt}]
                )
            attributes["gen_ai.input.messages"] = json_text([message(m) for m in messages])
        span.set_attributes(attributes)
        token = chat_span.set(span)
        try:
            yield
        finally:
            chat_span.reset(token)


def answered(turn: AssistantTurn) -> None:
    """The model's turn: usage and finish reason on the request's span."""
    span = chat_span.get()
    if not span.is_recording():
        return
    current = drive_span.get()
    if current is not NO_DRIVE:
        current.input_tokens += turn.usage.input_tokens
        current.output_tokens += turn.usage.output_tokens
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": turn.usage.input_tokens,
            "gen_ai.usage.output_tokens": turn.usage.output_tokens,
            "gen_ai.response.finish_reasons": [turn.finish_reason],
        }
    )
    if settings.capture_content:
        span.set_attribute("gen_ai.output.messages", json_text([message(turn)]))


def model_retry(
    attempt: int, delay: float, status_code: int | None, retry_after: float | None
) -> None:
    """A retryable model failure: the request is sent again after ``delay`` seconds."""
    span = chat_span.get()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {"bide.retry.attempt": attempt, "bide.retry.delay_s": delay}
    if status_code is not None:
        attributes["http.response.status_code"] = status_code
    if retry_after is not None:
        attributes["bide.retry.retry_after_s"] = retry_after
    span.add_event("retry", attributes)
