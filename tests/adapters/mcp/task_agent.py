"""Agents whose side effect is a long-running or multi-round MCP call, over streamable HTTP.

``tests.adapters.mcp.task_agent:charging``: a charge the server answers as a task (TASK_SERVER
is the server's URL, CALL_TIMEOUT the tool's timeout in seconds).
``tests.adapters.mcp.task_agent:confirming``: a transfer the server confirms in an input round,
made with durable elicitation (ROUND_SERVER is its URL).
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


TRANSFER = [
    {"tool_calls": [{"id": "c1", "name": "transfer", "arguments": {"amount": 5}}]},
    {"text": "sent"},
]


@asynccontextmanager
async def confirming() -> AsyncIterator[Agent]:
    async with mcp.connect(os.environ["ROUND_SERVER"], name="bank") as session:
        listed = await mcp.tools(session, durable_elicitation=True, call_timeout=30)
        yield Agent(model=ScriptedModel(TRANSFER), tools=listed, name="confirming")
