"""OpenTelemetry spans of drives, model requests and tool calls, and what durability did in them.

Only the OpenTelemetry API is used: with no tracer provider set every span is a no-op and no
attribute is built. Span and attribute names follow the GenAI semantic conventions where they
apply (``gen_ai.*``); what only bide knows is under ``bide.*``. See ``docs/observability.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runtime.messages import AssistantTurn, Message, ToolResultMessage, UserMessage
from runtime.result import Halt, RunResult, RunStatus, Waiting

__all__ = [
    "TRACE_FIELD",
    "add_trace_ids",
    "configure",
    "trace_headers",
]

TRACE_FIELD = "trace"
"""The key of the run start record's payload that keeps the first drive's trace context."""

_SCOPE = "bide"
_W3C = TraceContextTextMapPropagator()
"""Only W3C trace context leaves the process (never the host's baggage): ``traceparent`` and
``tracestate``, which identify a span and carry nothing of the run."""


@dataclass(slots=True)
class _Settings:
    tracer: trace.Tracer
    own_provider: bool = False
    capture_content: bool = False
    propagate: bool = True


_settings = _Settings(trace.get_tracer(_SCOPE))
_NO_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def _tracer() -> trace.Tracer | None:
    """The tracer to use now, or ``None`` when nothing would be recorded.

    The API's no-op tracer still attaches a context per span; asking whether any provider is
    set (the global one can be set at any time) is cheaper, and makes a host without tracing
    pay one check per span.
    """
    if not _settings.own_provider and isinstance(trace.get_tracer_provider(), _NO_PROVIDER):
        return None
    return _settings.tracer


@dataclass(slots=True)
class _DriveSpan:
    span: Span
    input_tokens: int = 0
    output_tokens: int = 0


_NO_DRIVE = _DriveSpan(trace.INVALID_SPAN)
_drive_span: ContextVar[_DriveSpan] = ContextVar("bide_drive_span", default=_NO_DRIVE)
_chat_span: ContextVar[Span] = ContextVar("bide_chat_span", default=trace.INVALID_SPAN)
_tool_span: ContextVar[Span] = ContextVar("bide_tool_span", default=trace.INVALID_SPAN)


def configure(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool = False,
    propagate: bool = True,
) -> None:
    """Choose where bide's spans go and what they may hold; with no argument, the defaults.

    ``tracer_provider``: ``None`` uses the global one (``opentelemetry.trace.set_tracer_provider``;
    unset, nothing is recorded). ``capture_content``: put tool arguments and results, the run's
    input and output, prompts and completions on spans (off by default: they may hold personal
    data). ``propagate``: send ``traceparent`` to model providers with each request.
    """
    tracer = (
        trace.get_tracer(_SCOPE) if tracer_provider is None else tracer_provider.get_tracer(_SCOPE)
    )
    _settings.tracer = tracer
    _settings.own_provider = tracer_provider is not None
    _settings.capture_content = bool(capture_content)
    _settings.propagate = bool(propagate)


# --- logs and propagation --------------------------------------------------------------------


def add_trace_ids(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
    """A structlog processor: ``trace_id`` and ``span_id`` of the active span, when there is one.

    Add it to the processor chain before the renderer; an event logged outside any span is left
    as it is.
    """
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


def trace_headers() -> dict[str, str]:
    """The W3C trace context of the active span as HTTP headers, or ``{}`` (no span, or off)."""
    if not _settings.propagate or not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier


@contextmanager
def _started(tracer: trace.Tracer, name: str, kind: SpanKind) -> Iterator[Span]:
    """A current span that an exception marks with its type only.

    An exception's message and traceback may quote a provider's reply or a tool's data; the
    logs keep them (with this span's ids), the span keeps ``error.type``.
    """
    with tracer.start_as_current_span(
        name, kind=kind, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as exc:
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise


# --- drives ----------------------------------------------------------------------------------


@contextmanager
def drive(agent: str, run_id: str) -> Iterator[None]:
    """The span of one drive: ``invoke_agent {agent}``; the hooks below annotate it."""
    tracer = _tracer()
    if tracer is None:
        yield
        return
    with _started(tracer, f"invoke_agent {agent}", SpanKind.INTERNAL) as span:
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
        token = _drive_span.set(_DriveSpan(span))
        try:
            yield
        finally:
            _drive_span.reset(token)


def journaled_context() -> dict[str, Any]:
    """What the run's start record keeps of this drive's span, so later drives can link to it."""
    span = _drive_span.get().span
    if not span.is_recording():
        return {}
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return {TRACE_FIELD: carrier} if carrier else {}


def drive_input(text: str) -> None:
    """The run's input on the drive span, when content capture is on."""
    span = _drive_span.get().span
    if span.is_recording() and _settings.capture_content:
        span.set_attribute("gen_ai.input.messages", _json([_text_message("user", text)]))


def resumed(start: Mapping[str, Any] | None, records: int, turns: int, replayed: int) -> None:
    """This drive resumes a run: link to its first drive and say what the journal held."""
    span = _drive_span.get().span
    if not span.is_recording():
        return
    first = _linked_context(start)
    if first is not None and first.span_id != span.get_span_context().span_id:
        span.add_link(first, {"bide.link": "first_drive"})
    span.set_attribute("bide.resumed", True)
    span.add_event(
        "resumed",
        {"bide.records": records, "bide.turns": turns, "bide.calls_replayed": replayed},
    )


def stopped(reason: str, remedy: str) -> None:
    """The drive journaled a stop short of an end (a budget reached, a model unavailable)."""
    span = _drive_span.get().span
    if span.is_recording():
        span.add_event("stop", {"bide.stop.reason": reason, "bide.stop.remedy": remedy})


def finished(result: RunResult) -> None:
    """The drive returned ``result``; its usage is that of the model requests it made."""
    current = _drive_span.get()
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
    if _settings.capture_content and result.output is not None:
        output = [_text_message("assistant", result.output)]
        span.set_attribute("gen_ai.output.messages", _json(output))


def _linked_context(start: Mapping[str, Any] | None) -> trace.SpanContext | None:
    carrier = (start or {}).get(TRACE_FIELD)
    if not isinstance(carrier, Mapping):
        return None
    headers = {str(k): v for k, v in carrier.items() if isinstance(v, str)}
    context = trace.get_current_span(_W3C.extract(headers)).get_span_context()
    return context if context.is_valid else None


# --- model requests --------------------------------------------------------------------------


@contextmanager
def chat(
    model: object, n: int, system_prompt: str | None, messages: Sequence[Message]
) -> Iterator[None]:
    """The span of one model request, retries included: ``chat {model}``."""
    if _drive_span.get() is _NO_DRIVE:  # not tracing this drive (no provider, or not sampled)
        yield
        return
    name = getattr(model, "model", None)
    name = name if isinstance(name, str) and name else None
    with _started(_settings.tracer, f"chat {name}" if name else "chat", SpanKind.CLIENT) as span:
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
        if _settings.capture_content:
            if system_prompt:
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": system_prompt}]
                )
            attributes["gen_ai.input.messages"] = _json([_message(m) for m in messages])
        span.set_attributes(attributes)
        token = _chat_span.set(span)
        try:
            yield
        finally:
            _chat_span.reset(token)


def answered(turn: AssistantTurn) -> None:
    """The model's turn: usage and finish reason on the request's span."""
    span = _chat_span.get()
    if not span.is_recording():
        return
    current = _drive_span.get()
    if current is not _NO_DRIVE:
        current.input_tokens += turn.usage.input_tokens
        current.output_tokens += turn.usage.output_tokens
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": turn.usage.input_tokens,
            "gen_ai.usage.output_tokens": turn.usage.output_tokens,
            "gen_ai.response.finish_reasons": [turn.finish_reason],
        }
    )
    if _settings.capture_content:
        span.set_attribute("gen_ai.output.messages", _json([_message(turn)]))


def model_retry(
    attempt: int, delay: float, status_code: int | None, retry_after: float | None
) -> None:
    """A retryable model failure: the request is sent again after ``delay`` seconds."""
    span = _chat_span.get()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {"bide.retry.attempt": attempt, "bide.retry.delay_s": delay}
    if status_code is not None:
        attributes["http.response.status_code"] = status_code
    if retry_after is not None:
        attributes["bide.retry.retry_after_s"] = retry_after
    span.add_event("retry", attributes)


# --- tool calls ------------------------------------------------------------------------------


@contextmanager
def tool_call(call_id: str, tool: str, plan: Mapping[str, Any], arguments: Any) -> Iterator[None]:
    """The span of one tool call: ``execute_tool {tool}``, with what the journal made of it."""
    if _drive_span.get() is _NO_DRIVE:
        yield
        return
    with _started(_settings.tracer, f"execute_tool {tool}", SpanKind.INTERNAL) as span:
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
        if _settings.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(arguments)
        span.set_attributes(attributes)
        token = _tool_span.set(span)
        try:
            yield
        finally:
            _tool_span.reset(token)


def marker_written(attempt: int) -> None:
    """A side effect's attempt marker is committed: its outcome is now journaled or unknown."""
    span = _tool_span.get()
    if span.is_recording():
        span.set_attribute("bide.tool.safety", "side_effect")
        span.add_event("attempt_marker_written", {"bide.attempt": attempt})


def tool_retry(attempt: int, delay: float, error_type: str) -> None:
    """A retry-safe call failed and runs again after ``delay`` seconds."""
    span = _tool_span.get()
    if span.is_recording():
        span.add_event(
            "retry",
            {"bide.retry.attempt": attempt, "bide.retry.delay_s": delay, "error.type": error_type},
        )


def recorded(payload: Mapping[str, Any], *, won: bool) -> None:
    """The call's result record; ``won`` is False when the journal already held one (replayed)."""
    span = _tool_span.get()
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
    if _settings.capture_content:
        key = "value" if outcome == "value" else "error"
        attributes["gen_ai.tool.call.result"] = _json(winner.get(key))
    span.set_attributes(attributes)


def call_ended(outcome: object) -> None:
    """What a call's drive came to when it did not record a result: a halt or a wait."""
    span = _tool_span.get()
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
        if outcome.prompt is not None and _settings.capture_content:
            attributes["bide.waiting.prompt"] = outcome.prompt
        span.add_event("waiting", attributes)
        span.set_attribute("bide.waiting", outcome.kind)


def approval_decided(outcome: str, *, replayed: bool) -> None:
    """The approval gate's terminal tally, taken now or from the journal."""
    span = _tool_span.get()
    if span.is_recording():
        span.add_event("approval", {"bide.approval.outcome": outcome, "bide.replayed": replayed})


# --- resolutions -----------------------------------------------------------------------------


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
    tracer = _tracer()
    if tracer is None:
        return
    first = _linked_context(start)
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
        if _settings.capture_content and outcome == "value":
            event["gen_ai.tool.call.result"] = _json(value)
        span.add_event("resolved", event)
    finally:
        span.end()


def now_ns() -> int:
    """The wall clock in nanoseconds, as spans take their start times."""
    return time.time_ns()


# --- content, when captured ------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _message(message: Message) -> dict[str, Any]:
    """A message in the conventions' shape: a role and its parts."""
    if isinstance(message, UserMessage):
        return _text_message("user", message.text)
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": message.call_id, "response": message.content}
            ],
        }
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return {"role": "assistant", "parts": parts, "finish_reason": message.finish_reason}
