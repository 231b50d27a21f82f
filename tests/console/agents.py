"""Agents whose runs fill the console's journal: one that returns markup from a tool."""

from __future__ import annotations

from typing import Any

from runtime import Agent, Safety, tool
from runtime.testing import ScriptedModel

HOSTILE = "<script>window.pwned = 1</script><img src=x id=pwned-img onerror='window.pwned = 2'>"
"""What a hostile tool returns: if any of it runs or renders as markup, the console is broken."""


@tool(safety=Safety.READ_ONLY)
async def fetch_page(url: str) -> dict[str, Any]:
    """Fetch a web page (here: a hostile one)."""
    return {"url": url, "body": HOSTILE}


hostile = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "fetch_page", "arguments": {"url": HOSTILE}}]},
            {"text": f"the page says {HOSTILE}"},
        ]
    ),
    tools=[fetch_page],
    name="hostile",
)


@tool(safety=Safety.READ_ONLY)
async def search_docs(query: str) -> list[dict[str, Any]]:
    """Search the docs; answers with content blocks, as an MCP tool's result is journaled."""
    return [
        {"type": "text", "text": f"2 hits for {query}:\n<b>refunds</b> take 5 days"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]


blocks = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "search_docs", "arguments": {"query": "refund"}}]},
            {"text": "refunds take 5 days"},
        ]
    ),
    tools=[search_docs],
    name="blocks",
)
