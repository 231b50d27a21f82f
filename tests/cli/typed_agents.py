"""A typed-output agent the CLI tests name (``tests.cli.typed_agents:typed``): apart from
``tests.cli.agents`` so that a plain run's process imports no pydantic
(``tests/cli/test_imports.py``)."""

from __future__ import annotations

import pydantic

from runtime import Agent
from runtime.testing import ScriptedModel


class Quote(pydantic.BaseModel):
    customer: str
    cents: int


typed = Agent(
    model=ScriptedModel([{"output": {"customer": "ann", "cents": 1200}}]),
    output_type=Quote,
    name="typed",
)
