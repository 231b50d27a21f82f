"""An agent whose charge is an MCP tool paired with its server's lookup tool.

``tests.adapters.mcp.ledger_agent:paired``: the server runs over stdio for the length of a drive.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import StdioServerParameters

from adapters import mcp
from runtime import Agent, Safety
from runtime.testing import ScriptedModel

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
    {"text": "charged"},
]


@asynccontextmanager
async def paired() -> AsyncIterator[Agent]:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.adapters.mcp.ledger_server"], env=_env()
    )
    async with mcp.connect(server, name="ledger") as session:
        tools = await mcp.tools(
            session, safety={"find_charge": Safety.READ_ONLY}, reconcile={"charge": "find_charge"}
        )
        yield Agent(model=ScriptedModel(SCRIPT), tools=tools, name="ledger")


def _env() -> dict[str, str]:
    import os

    return {k: os.environ[k] for k in ("LEDGER", "PYTHONPATH") if k in os.environ}
