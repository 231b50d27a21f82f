"""What every span hook shares: the settings ``configure`` sets, the tracer, the spans of the
drive, model request and tool call now running (context variables), and content conversion."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runtime.messages import Message, ToolResultMessage, UserMessage

__all__ = [
    "NO_DRIVE",
    "NO_SPAN",
    "TRACE_FIELD",
    "W3C",
    "DriveSpan",
    "active_tracer",
    "add_trace_ids",
    "chat_span",
    "configure",
    "drive_span",
    "json_text",
    "message",
    "now_ns",
    "settings",
    "started",
    "text_message",
    "tool_span",
    "trace_headers",
]

TRACE_FIELD = "trace"
"""The key of the run start record's payload that keeps the first drive's trace context."""

SCOPE = "bide"
W3C = TraceContextTextMapPropagator()
"""Only W3C trace context leaves the process (never the host's baggage): ``traceparent`` and
``tracestate``, which identify a span and carry nothing of the run."""


@dataclass(slots=True)
class Settings:
    tracer: trace.Tracer
    own_provider: bool = False
    capture_content: bool = False
    propagate: bool = True


settings = Settings(trace.get_tracer(SCOPE))
NO_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def active_tracer() -> trace.Tracer | None:
    """The tracer to use now, or ``None`` when nothing would be recorded.

    The API's no-op tracer still attaches a context per span; asking whether any provider is
    set (the global one can be set at any time) is cheaper, and makes a host without tracing
    pay one check per span.
    """
    if not settings.own_provider and isinstance(trace.get_tracer_provider(), NO_PROVIDER):
        return None
    return settings.tracer


@dataclass(slots=True)
class DriveSpan:
    span: Span
    input_tokens: int = 0
    output_tokens: int = 0


NO_DRIVE = DriveSpan(trace.INVALID_SPAN)
NO_SPAN: AbstractContextManager[None] = nullcontext()
"""What a span hook returns when nothing would be recorded: one shared object, so that a drive
that is not traced allocates no context manager per drive, request or call."""
drive_span: ContextVar[DriveSpan] = ContextVar("bide_drive_span", default=NO_DRIVE)
chat_span: ContextVar[Span] = ContextVar("bide_chat_span", default=trace.INVALID_SPAN)
tool_span: ContextVar[Span] = ContextVar("bide_tool_span", default=trace.INVALID_SPAN)


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
        trace.get_tracer(SCOPE) if tracer_provider is None else tracer_provider.get_tracer(SCOPE)
    )
    settings.tracer = tracer
    settings.own_provider = tracer_provider is not None
    settings.capture_content = bool(capture_content)
    settings.propagate = bool(propagate)


# --- logs and propagation ------------------------------------------------------------------


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
    if not settings.propagate or not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    W3C.inject(carrier)
    return carrier


@contextmanager
def started(tracer: trace.Tracer, name: str, kind: SpanKind) -> Iterator[Span]:
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


def now_ns() -> int:
    """The wall clock in nanoseconds, as spans take their start times."""
    return time.time_ns()


# --- content, when captured ----------------------------------------------------------------


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def message(message: Message) -> dict[str, Any]:
    """A message in the conventions' shape: a role and its parts."""
    if isinstance(message, UserMessage):
        return text_message("user", message.text)
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
