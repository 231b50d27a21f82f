"""Pydantic AI agents for the adapter's tests: real Pydantic AI code, only the model scripted
(``FunctionModel``). ``billing`` looks a customer up and charges them; the CLI and worker
rebuild it as ``tests.adapters.pydantic_ai.agents:billing``.

Each charge goes to the test provider (``tests.adapters.provider``: a ledger outside the
journal, and a reply it can lose).
"""

from __future__ import annotations

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from adapters.pydantic_ai import DurableAgent, call_context
from runtime import Safety
from tests.adapters import provider

SPEC = "tests.adapters.pydantic_ai.agents:billing"


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Look up, charge, then say what the charge returned (or that it failed)."""
    parts = [p for m in messages for p in m.parts]
    done = {p.tool_name: p for p in parts if isinstance(p, ToolReturnPart)}
    if "lookup" not in done:
        return ModelResponse(parts=[ToolCallPart("lookup", {"customer": "ann"}, "call_lookup")])
    if "charge" not in done:
        args = {"customer": "ann", "cents": 500}
        return ModelResponse(parts=[ToolCallPart("charge", args, "call_charge")])
    charged = done["charge"]
    if charged.outcome != "success":
        return ModelResponse(parts=[TextPart(f"failed: {charged.content}")])
    return ModelResponse(parts=[TextPart(f"charged: {charged.content}")])


billing_agent = Agent(
    FunctionModel(_script), name="billing", instructions="You bill customers.", deps_type=str
)


@billing_agent.tool
def lookup(ctx: RunContext[str], customer: str) -> dict[str, str]:
    """A customer's card status (read-only)."""
    return {"customer": customer, "card": "ok", "region": ctx.deps}


@billing_agent.tool_plain
def charge(customer: str, cents: int) -> dict[str, object]:
    """Charge a customer's card (a side effect)."""
    key = call_context().idempotency_key
    provider.charge(customer, cents, key)
    return {"charged": cents, "key": key}


billing = DurableAgent(billing_agent, tools={"lookup": Safety.READ_ONLY}, deps=lambda: "eu")
