"""An approval gate on an MCP tool: the server sees no call until the gate opens."""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus, single_approval
from runtime.testing import ScriptedModel

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "refund", "arguments": {"order": "A-1"}}]},
    {"text": "refunded"},
]


def refund_desk(calls: list[str]) -> MCPServer:
    server = MCPServer("desk")

    @server.tool()
    def refund(order: str) -> str:
        calls.append(order)
        return f"refunded {order}"

    return server


async def drive(db: Path, calls: list[str]) -> RunStatus:
    async with connect(refund_desk(calls)) as session:
        listed = await tools(session, approval={"refund": single_approval()})
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed)
        async with Journal(db) as journal:
            return (await agent.run("r", "go", journal=journal)).status


async def test_the_server_sees_zero_calls_until_approved_and_exactly_one_after(
    db_path: Path,
) -> None:
    calls: list[str] = []
    assert await drive(db_path, calls) is RunStatus.WAITING
    assert await drive(db_path, calls) is RunStatus.WAITING
    assert calls == []
    async with Journal(db_path) as journal:
        await journal.approve("r", "c1", by="lead")
    assert await drive(db_path, calls) is RunStatus.COMPLETED
    assert await drive(db_path, calls) is RunStatus.COMPLETED
    assert calls == ["A-1"]
