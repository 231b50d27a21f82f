"""Agent specs for the ``list`` / ``show`` tests (``tests.cli.view_agents:ATTR``)."""

from __future__ import annotations

from runtime import Agent
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
