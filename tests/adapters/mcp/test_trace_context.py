"""An MCP call made by a drive carries its execute_tool span as the W3C traceparent in ``_meta``.

The MCP SDK injects the active trace context into each request's ``_meta`` on its JSON-RPC
transports (SEP-414; its in-process transport does not); bide's part is that the call runs
inside its ``execute_tool`` span. This pins both, over stdio with a real server process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus, tracing
from runtime.testing import ScriptedModel

SCRIPT = [{"tool_calls": [{"id": "m1", "name": "act", "arguments": {}}]}, {"text": "done"}]

SERVER = """
import json
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("meta-echo")

@server.tool()
def act(ctx: Context) -> str:
    \"\"\"Say the _meta of the request.\"\"\"
    return json.dumps(ctx.request_context.meta, default=str)

server.run()
"""


async def metas_sent(tmp_path: Path, runs: int) -> list[dict[str, Any]]:
    """Drive runs of one MCP call each through one server process; return the ``_meta``s it got.

    Tracing is on for the first run only.
    """
    script = tmp_path / "meta_server.py"
    script.write_text(SERVER, encoding="utf-8")
    params = StdioServerParameters(command=sys.executable, args=[str(script)])
    metas: list[dict[str, Any]] = []
    async with connect(params) as session, Journal(tmp_path / "bide.db") as journal:
        agent = Agent(model=ScriptedModel(SCRIPT), tools=await tools(session))
        for n in range(runs):
            if n == 1:
                tracing.configure()
            result = await agent.run(f"r{n}", "go", journal=journal)
            assert result.status is RunStatus.COMPLETED
            recorded = (await journal.require(f"r{n}")).calls["m1"].result
            assert recorded is not None
            (content,) = recorded.payload["value"]
            metas.append(json.loads(content["text"]))
    return metas


async def test_the_call_carries_its_execute_tool_span_in_meta_and_nothing_without_one(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        traced, untraced = await metas_sent(tmp_path, runs=2)
    finally:
        tracing.configure()
        provider.shutdown()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool act"]
    ctx = span.context
    assert str(traced["traceparent"]).startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    assert "traceparent" not in untraced
