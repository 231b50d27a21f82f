"""Agent specs for the ``list`` / ``show`` tests (``tests.cli.view_agents:ATTR``)."""

from __future__ import annotations

from typing import Any

from runtime import Agent, tool
from runtime.testing import ScriptedModel

BIDI = "\u202e\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c"
"""Every bidirectional control: each reorders what a terminal shows."""

bidi = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": f"c1{BIDI}", "name": f"pay{BIDI}lanigiro", "arguments": {}}]},
            {"text": f"done{BIDI}"},
        ]
    ),
    name=f"bidi{BIDI}",
)


@tool
async def charge(customer: str, amount: int) -> dict[str, Any]:
    """A side effect whose provider fails in a way that is not a ToolError: it may have acted."""
    raise RuntimeError("provider said 502")


provider_fails = Agent(
    model=ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
                ]
            },
            {"text": "charged"},
        ]
    ),
    tools=[charge],
    name="provider-fails",
)
