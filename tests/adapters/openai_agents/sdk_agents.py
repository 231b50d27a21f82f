"""Agents SDK agents for the adapter's tests: real SDK code, only the model scripted (the SDK's
``agents.testing.ScriptedModel``, each step answering from the call's input, so a fresh process
answers right). The CLI rebuilds ``billing`` as ``tests.adapters.openai_agents.sdk_agents:billing``,
and ``triage`` (which hands off to the same billing agent) as ``...:triage``.

Each charge goes to the test provider (``tests.adapters.provider``).
"""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from adapters.openai_agents import DurableSDKAgent, call_context
from runtime import Safety
from tests.adapters import provider

SPEC = "tests.adapters.openai_agents.sdk_agents:billing"
TRIAGE_SPEC = "tests.adapters.openai_agents.sdk_agents:triage"


def outputs(call: ModelCall) -> dict[str, str]:
    """The function outputs in the call's input, by call id."""
    return {
        item["call_id"]: item["output"]
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def answer(call: ModelCall) -> Any:
    done = outputs(call)
    if "call_lookup" not in done:
        return [function_call("lookup", {"customer": "ann"}, call_id="call_lookup")]
    if "call_charge" not in done:
        return [function_call("charge", {"customer": "ann", "cents": 500}, call_id="call_charge")]
    return [assistant_message(f"charged: {done['call_charge']}", item_id="msg_final")]


@function_tool
def lookup(customer: str) -> str:
    """A customer's card status (read-only)."""
    return f"{customer}: card ok"


@function_tool
def charge(customer: str, cents: int) -> str:
    """Charge a customer's card (a side effect)."""
    provider.charge(customer, cents, call_context().idempotency_key)
    return f"charged {cents}"


sdk_agent = Agent(
    name="billing",
    instructions="You bill customers.",
    model=ScriptedModel([ModelStep.respond(answer) for _ in range(50)]),
    tools=[lookup, charge],
)
billing = DurableSDKAgent(sdk_agent, tools={"lookup": Safety.READ_ONLY})


def hand_to_billing(call: ModelCall) -> Any:
    return [
        assistant_message("Billing will take it from here.", item_id="msg_hand"),
        function_call("transfer_to_billing", {}, call_id="call_hand"),
    ]


triage_agent = Agent(
    name="triage",
    instructions="Route the customer.",
    model=ScriptedModel([ModelStep.respond(hand_to_billing) for _ in range(50)]),
    handoffs=[sdk_agent],
)
triage = DurableSDKAgent(triage_agent, tools={"lookup": Safety.READ_ONLY})
