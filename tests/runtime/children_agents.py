"""A parent agent that hands billing to a child agent (``as_tool``), whose charge is a side
effect written to a ledger file (``$BIDE_TEST_LEDGER``): what the tests of child runs drive. (A
tree killed at every crash point is the crash suite's: ``tests/crash``, the ``tree`` script.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime import Agent, Safety, ToolContext, ToolOutcomeUnknown, faults, tool
from runtime.testing import ScriptedModel

CHILD_INPUT = "charge ann 5"


def ledger() -> Path:
    return Path(os.environ["BIDE_TEST_LEDGER"])


def charges() -> list[str]:
    """Every charge that reached the provider: one line each, its idempotency key."""
    path = ledger()
    return path.read_text().splitlines() if path.exists() else []


@tool
async def charge(customer: str, amount: int, context: ToolContext) -> dict[str, Any]:
    """Charge a customer (a side effect, ledgered)."""
    with ledger().open("a") as f:
        f.write(f"{context.idempotency_key}\n")
    faults.crashpoint("tool.after_effect")
    return {"charged": amount, "customer": customer}


@tool(safety=Safety.READ_ONLY)
async def lookup(customer: str) -> dict[str, Any]:
    """Look a customer up."""
    return {"customer": customer, "plan": "pro"}


def biller() -> Agent:
    call = {"id": "k1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "charged ann 5"}])
    return Agent(model=model, tools=[charge], name="biller")


def reader() -> Agent:
    call = {"id": "r1", "name": "lookup", "arguments": {"customer": "ann"}}
    return Agent(
        model=ScriptedModel([{"tool_calls": [call]}, {"text": "ann is on pro"}]),
        tools=[lookup],
        name="reader",
    )


def parent(child: Agent | None = None) -> Agent:
    child = child or biller()
    call = {"id": "c1", "name": child.name, "arguments": {"input": CHILD_INPUT}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "done"}])
    return Agent(model=model, tools=[child.as_tool()], name="front")


@tool(name="charge")
async def charge_lost(customer: str, amount: int) -> dict[str, Any]:
    """Charge a customer; the connection drops after the request left."""
    raise ToolOutcomeUnknown("the connection dropped after the request left")


def halting_parent() -> Agent:
    """A parent whose child's charge halts (its outcome is never known)."""
    call = {"id": "k1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "charged ann 5"}])
    return parent(Agent(model=model, tools=[charge_lost], name="biller"))
