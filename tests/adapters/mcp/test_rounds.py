"""Input rounds of a side effect (SEP-2322): with durable elicitation each round is journaled as a
step of the attempt, the run waits for the answer, and a resume sends it with the journaled
request state exactly as received; a crash with a round in flight halts.

Against an in-process server; the run across processes is in ``test_rounds_process.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from adapters.mcp import connect, decline_elicitation, tools
from runtime import Agent, Journal, RunStatus
from runtime import records as R
from runtime.errors import ProtocolError
from runtime.testing import ScriptedModel
from runtime.tools import ToolContext
from tests.adapters.mcp.round_server import Rounds, round_server

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "transfer", "arguments": {"amount": 5}}]},
    {"text": "sent"},
]


async def drive(
    db: Path,
    rounds: Rounds,
    *,
    resume: bool = False,
    durable: bool = True,
    wait: float = 10,
    resolver: Any = None,
) -> Any:
    async with connect(round_server(rounds), name="bank", elicitation=resolver) as session:
        listed = await tools(session, durable_elicitation=durable, call_timeout=wait)
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed)
        async with Journal(db) as journal:
            if resume:
                result = await agent.resume("r", journal=journal)
            else:
                result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    return result, state


async def test_a_side_effect_waits_for_its_confirmation_and_resumes_with_the_exact_state(
    db_path: Path,
) -> None:
    rounds = Rounds(None)
    result, state = await drive(db_path, rounds)
    assert result.status is RunStatus.WAITING
    (waiting,) = result.waiting
    assert waiting.prompt == "Send 5 to Bob?" and waiting.key is not None
    assert waiting.schema["properties"]["ok"]["type"] == "boolean"
    assert state.status() == "waiting"
    (sending, step) = state.calls["c1"].handles[1].values()
    assert sending.payload["handle"] == {"mcp_call": {"server": "bank", "principal": None}}
    assert sending.payload["in_flight"] is True  # which server, journaled before it left
    journaled = step.payload["handle"]["mcp_input"]
    assert journaled["round"] == 1 and isinstance(journaled["state"], str)  # sealed, as sent
    assert set(journaled["requests"]) == {"confirm"}
    assert rounds.seen == ["round 1"]

    async with Journal(db_path) as journal:
        await journal.answer("r", waiting.key, {"ok": True})
    result, state = await drive(db_path, rounds, resume=True)
    assert result.status is RunStatus.COMPLETED
    # Each round once; round 2 reached the tool, so it carried the sealed state byte for byte.
    assert rounds.seen == ["round 1", "round 2", "transfer 5"]
    kinds = [r.kind for r in state.records if r.payload and r.payload.get("call_id") == "c1"]
    assert kinds == [R.ATTEMPT, R.HANDLE, R.HANDLE, R.INTERRUPT, R.ANSWER, R.HANDLE, R.RESULT]
    assert state.calls["c1"].message_content() == ([{"type": "text", "text": '{"sent": 5}'}], False)


async def test_a_round_in_flight_when_the_drive_stops_halts_and_is_never_sent_again(
    db_path: Path,
) -> None:
    rounds = Rounds(None, hang_round=2)
    result, _ = await drive(db_path, rounds)
    async with Journal(db_path) as journal:
        await journal.answer("r", result.waiting[0].key, {"ok": True})
    result, state = await drive(db_path, rounds, resume=True, wait=0.3)
    assert result.status is RunStatus.HALTED and state.status() == "halted"
    rounds.hang_round = 0
    result, _ = await drive(db_path, rounds, resume=True)
    assert result.status is RunStatus.HALTED
    (halt,) = result.halts
    assert "step 3" in halt.cause and "may have acted" in halt.cause
    assert rounds.seen == ["round 1", "round 2"]  # round 2 was not sent again


async def test_without_durable_elicitation_a_side_effects_round_is_answered_live(
    db_path: Path,
) -> None:
    rounds = Rounds(None)
    result, state = await drive(db_path, rounds, durable=False, resolver=decline_elicitation)
    # The resolver declines live, and the server says it was not confirmed.
    assert result.status is RunStatus.COMPLETED
    # Only the step naming the server, before the call left: no round was journaled.
    (step,) = [r.payload["handle"] for r in state.records if r.kind == R.HANDLE]
    assert set(step) == {"mcp_call"}
    assert rounds.count("transfer") == 0


@asynccontextmanager
async def state_replaced(server: MCPServer, state: Any) -> AsyncIterator[Any]:
    """Serve ``server`` in process with the requestState of its answers replaced on the wire."""
    async with InMemoryTransport(server) as (from_server, to_server):
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](32)

        async def inbound() -> None:
            async with to_client:
                async for item in from_server:
                    message = item.message
                    if isinstance(message, types.JSONRPCResponse) and "requestState" in (
                        message.result or {}
                    ):
                        message.result["requestState"] = state
                    await to_client.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            try:
                async with client_reads:
                    yield client_reads, to_server
            finally:
                tg.cancel_scope.cancel()


@pytest.mark.parametrize("state", [7, {"s": 1}, ["x"]])
async def test_a_request_state_that_is_not_a_string_is_a_protocol_error_naming_the_server(
    state: Any,
) -> None:
    server = round_server(Rounds(None))
    async with connect(state_replaced(server, state), name="bank") as session:
        (transfer,) = await tools(session, durable_elicitation=True)
        context = ToolContext(run_id="r", call_id="c1", tool_name="transfer")
        with pytest.raises(ProtocolError, match=r"MCP server 'bank' .* requestState that is not"):
            await transfer.call({"amount": 5}, context)
