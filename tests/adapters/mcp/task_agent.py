"""An agent whose charge an MCP server over streamable HTTP answers as a task.

``tests.adapters.mcp.task_agent:charging``: TASK_SERVER is the server's URL, CALL_TIMEOUT the
tool's timeout in seconds.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adapters import mcp
from runtime import Agent
from runtime.testing import ScriptedModel

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
    {"text": "charged"},
]


@asynccontextmanager
async def charging() -> AsyncIterator[Agent]:
    async with mcp.connect(os.environ["TASK_SERVER"], tasks=True, name="tasks") as session:
        listed = await mcp.tools(session, call_timeout=float(os.environ.get("CALL_TIMEOUT", "30")))
        yield Agent(model=ScriptedModel(SCRIPT), tools=listed, name="charging")
