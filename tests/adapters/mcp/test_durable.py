"""Durable elicitation: a retry-safe MCP call's question is journaled, pauses the run, and is
answered from the journal when the call runs again, in both protocol eras."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from adapters.mcp import ElicitationAnswer, ElicitationRequest, connect, decline_elicitation, tools
from runtime import Agent, Journal, RunStatus, Safety
from runtime.testing import ScriptedModel
from tests.adapters.mcp.kit import handshake_era, stalls_after_answering
from tests.adapters.mcp.test_elicitation import greeter

ERAS: dict[str, Callable[[Any], Any]] = {"handshake": handshake_era, "2026": lambda s: s}
SCRIPT = [{"tool_calls": [{"id": "c1", "name": "greet", "arguments": {}}]}, {"text": "greeted"}]


async def drive(db: Path, era: str, safety: Safety, resolver: Any = decline_elicitation) -> Any:
    async with connect(ERAS[era](greeter()), elicitation=resolver) as session:
        listed = await tools(session, safety={"greet": safety}, durable_elicitation=True)
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed)
        async with Journal(db) as journal:
            result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    return result, state


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("safety", [Safety.READ_ONLY, Safety.IDEMPOTENT])
async def test_an_unanswered_elicitation_pauses_the_run_and_the_journaled_answer_is_given_on_resume(
    db_path: Path, era: str, safety: Safety
) -> None:
    result, _ = await drive(db_path, era, safety)
    assert result.status is RunStatus.WAITING
    (waiting,) = result.waiting
    assert waiting.kind == "input" and waiting.prompt == "Your name?"
    assert waiting.key is not None and waiting.key.startswith("mcp-elicit-1-")
    assert waiting.schema["properties"]["name"]["type"] == "string"
    async with Journal(db_path) as journal:
        assert await journal.answer("r", waiting.key, {"name": "Ada"}, by="ops")
    # A fresh connection, as after a restart: the call runs again and is answered from the journal.
    result, state = await drive(db_path, era, safety)
    assert result.status is RunStatus.COMPLETED
    content, is_error = state.calls["c1"].message_content()
    assert not is_error and content[0]["text"] == "hi Ada"


async def test_a_side_effects_handshake_era_elicitation_is_answered_live_and_never_pauses(
    db_path: Path,
) -> None:
    """Mid-call, with the request open, a pause would lose the call. From 2026-07-28 the
    question comes as an input round instead, which is journaled (``test_rounds.py``)."""
    era = "handshake"

    asked: list[ElicitationRequest] = []

    async def resolver(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer.accept({"name": "Live"})

    result, state = await drive(db_path, era, Safety.SIDE_EFFECT, resolver)
    assert result.status is RunStatus.COMPLETED
    assert len(asked) == 1
    content, _ = state.calls["c1"].message_content()
    assert content[0]["text"] == "hi Live"
    assert not any(r.kind == "interrupt" for r in state.records)


async def test_without_durable_elicitation_a_retry_safe_call_is_answered_live(
    db_path: Path,
) -> None:
    async with connect(greeter(), elicitation=decline_elicitation) as session:
        listed = await tools(session, safety={"greet": Safety.READ_ONLY})
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed)
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal)
            content, _ = (await journal.require("r")).calls["c1"].message_content()
    assert result.status is RunStatus.COMPLETED
    assert content[0]["text"] == "no name (decline)"


async def test_a_result_that_arrives_at_the_deadline_is_recorded_when_the_agent_drives_it(
    db_path: Path,
) -> None:
    """The adapter keeps an answer in hand at its deadline; the Agent must not cancel it first."""
    server = MCPServer("charger")
    charged: list[int] = []

    @server.tool()
    def charge(cents: int) -> str:
        charged.append(cents)
        return f"charged {cents}"

    script = [
        {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"cents": 5}}]},
        {"text": "done"},
    ]
    async with connect(stalls_after_answering(server, 1.5)) as session:
        listed = await tools(session, call_timeout=1.0)
        assert listed[0].spec.safety is Safety.SIDE_EFFECT
        agent = Agent(model=ScriptedModel(script), tools=listed)
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    assert result.status is RunStatus.COMPLETED, result
    content, is_error = state.calls["c1"].message_content()
    assert not is_error and content[0]["text"] == "charged 5"
    assert charged == [5]
