"""The model adapters send the active span's W3C traceparent with each request, and only that."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime import Agent, Journal, Model, RunStatus, tracing
from tests.adapters.models.conftest import Models
from tests.adapters.models.provider_server import (
    ProviderServer,
    anthropic_text_stream,
    openai_text_stream,
)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        yield exporter
    finally:
        tracing.configure()
        provider.shutdown()


async def drive(model: Model, path: Path) -> None:
    async with Journal(path) as journal:
        result = await Agent(model=model).run("r", "hello", journal=journal)
        assert result.status is RunStatus.COMPLETED


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_each_request_carries_the_chat_span_as_its_parent(
    provider: str,
    spans: InMemorySpanExporter,
    server: ProviderServer,
    models: Models,
    tmp_path: Path,
) -> None:
    server.script(openai_text_stream() if provider == "openai" else anthropic_text_stream())
    model = models.openai() if provider == "openai" else models.anthropic()
    await drive(model, tmp_path / "bide.db")

    (chat,) = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert chat.name == ("chat test-model" if provider == "openai" else "chat claude-test")
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.provider.name"] == provider
    assert attributes["gen_ai.usage.input_tokens"] == 3
    (request,) = server.received
    ctx = chat.context
    assert request.headers["traceparent"].startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    assert "baggage" not in request.headers


async def test_no_traceparent_without_a_span_or_when_switched_off(
    server: ProviderServer, models: Models, tmp_path: Path
) -> None:
    server.script(openai_text_stream(), openai_text_stream())
    await drive(models.openai(), tmp_path / "none.db")  # no tracer provider: no span

    provider = TracerProvider()
    tracing.configure(tracer_provider=provider, propagate=False)
    try:
        await drive(models.openai(), tmp_path / "off.db")
    finally:
        tracing.configure()
        provider.shutdown()
    assert [("traceparent" in r.headers) for r in server.received] == [False, False]
