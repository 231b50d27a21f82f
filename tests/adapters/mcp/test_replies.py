"""How replies are read: a 2026-07-28 result without ``resultType`` is complete, and a reply that
cannot be read fails its call at once as an unknown outcome, not at the call's timeout."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus, Safety, ToolContext, ToolOutcomeUnknown
from runtime.retry import RetryPolicy
from runtime.testing import ScriptedModel
from tests.adapters.mcp.kit import hostile_params, without_result_type


def ledger_server(seen: list[str]) -> MCPServer:
    server = MCPServer("ledger")

    @server.tool()
    def charge(amount: int) -> str:
        """Charge a card."""
        seen.append(f"charge {amount}")
        return f"charged {amount}"

    return server


async def test_a_result_without_result_type_is_complete_and_a_side_effect_records_it(
    db_path: Path,
) -> None:
    seen: list[str] = []
    script = [
        {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
        {"text": "charged"},
    ]
    async with connect(without_result_type(ledger_server(seen))) as session:
        assert session.protocol_version == "2026-07-28"
        agent = Agent(model=ScriptedModel(script), tools=await tools(session))
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    assert result.status is RunStatus.COMPLETED
    content, is_error = state.calls["c1"].message_content()
    assert not is_error and content[0]["text"] == "charged 5"
    assert seen == ["charge 5"]


async def test_a_reply_that_cannot_be_read_fails_the_call_at_once_as_unknown() -> None:
    started = time.monotonic()
    async with connect(hostile_params(), name="broken") as session:
        by_name = {t.spec.name: t for t in await tools(session, call_timeout=30)}
        for tool, said in (("mumble", "not JSON"), ("malform", "not a JSON-RPC message")):
            context = ToolContext(run_id="r", call_id="c1", tool_name=tool)
            with anyio.fail_after(10):
                with pytest.raises(ToolOutcomeUnknown, match=f"'broken' wrote .* {said}") as caught:
                    await by_name[tool].call({}, context)
            assert (caught.value.run_id, caught.value.call_id) == ("r", "c1")
        # The session goes on: the next call is sent and answered.
        assert await by_name["echo"].call({"text": "still here"}) == [
            {"type": "text", "text": "still here"}
        ]
    assert time.monotonic() - started < 10


async def test_a_side_effect_whose_reply_cannot_be_read_halts_and_a_retry_safe_one_is_retried(
    db_path: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    script = [
        {
            "tool_calls": [
                {"id": "c1", "name": "malform", "arguments": {}},
                {"id": "c2", "name": "mumble", "arguments": {}},
            ]
        },
        {"text": "unreachable"},
    ]
    params = hostile_params(env={"BIDE_TEST_RUNS": str(runs)})
    async with connect(params) as session:
        listed = await tools(session, safety={"mumble": Safety.READ_ONLY})
        retry = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01)
        agent = Agent(model=ScriptedModel(script), tools=listed, tool_retry=retry)
        async with Journal(db_path) as journal:
            with anyio.fail_after(20):
                result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    assert result.status is RunStatus.HALTED
    assert state.calls["c1"].result is None and state.calls["c1"].halted
    content, is_error = state.calls["c2"].message_content()
    assert is_error and "after 2 attempts" in str(content)
    assert sorted(runs.read_text().splitlines()) == ["malform", "mumble", "mumble"]


def test_a_reply_line_nested_thousands_deep_is_reported_not_raised() -> None:
    """The reader names the line it could not read; one nested past Python's recursion limit
    must not end the reader with a RecursionError."""
    from adapters.mcp.stdio import _unreadable

    deep = '{"id": 1, "result": ' + "[" * 5000 + "]" * 5000 + "}"
    told = _unreadable(deep, "s", ValueError("too deep"))
    assert "wrote a line on stdout that is not JSON" in str(told)
