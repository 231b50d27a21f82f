"""A real provider over HTTP in a run that crashes mid-way: the resume never re-requests a
recorded turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import Agent, Journal, RunStatus, Safety, StorageError, tool
from tests.adapters.models.conftest import Models
from tests.adapters.models.provider_server import (
    ProviderServer,
    SSEReply,
    anthropic_events,
    anthropic_text_stream,
    openai_text_stream,
)
from tests.adapters.models.test_openai import calls_stream, tool_delta
from tests.helpers import inject


# IDEMPOTENT, so that its turn commits before it runs (a READ_ONLY call's turn commits with
# its result): a crash before the result finds the turn recorded.
@tool(safety=Safety.IDEMPOTENT)
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_crash_after_a_turn_is_recorded_resumes_without_requesting_it_again(
    server: ProviderServer, models: Models, db_path: Path, provider: str
) -> None:
    if provider == "openai":
        first = calls_stream(tool_delta(0, id="call_1", name="add", args='{"a": 2, "b": 3}'))
        final = openai_text_stream("5")
        make = models.openai
    else:
        first = SSEReply(
            anthropic_events(
                [{"id": "toolu_1", "name": "add", "json": '{"a": 2, "b": 3}'}],
                stop_reason="tool_use",
            )
        )
        final = anthropic_text_stream("5")
        make = models.anthropic
    server.script(first, final)
    # Writes: header, start, turn 1, then the tool's result: fail that one, as a crash would.
    async with Journal(db_path) as journal:
        inject(journal, 4, after_commit=False)
        with pytest.raises(StorageError):
            await Agent(model=make(), tools=[add]).run("r", "add 2 and 3", journal=journal)
    assert len(server.received) == 1
    async with Journal(db_path) as journal:
        result = await Agent(model=make(), tools=[add]).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and result.output == "5"
    assert len(server.received) == 2, "turn 1 was recorded; only turn 2 may be requested"
    second = server.received[1].body
    assert "5" in str(second), "the resumed request carries the tool's result"
