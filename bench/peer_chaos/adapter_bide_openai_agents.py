"""The peer chaos harness's OpenAI Agents SDK workload, run by bide
(``adapters.openai_agents``).

The same SDK code as the harness's plain SDK adapter: an ``agents.Agent`` with two
``@function_tool`` tools and a scripted ``Model`` (a function of the input items) carrying the
workload's crash points and latency. bide drives it through ``DurableSDKAgent``: ``lookup`` is
READ_ONLY, ``charge`` keeps the default SIDE_EFFECT and hands bide's idempotency key to the
ledger. A halted charge is settled by the ledger reconciler (as in
``adapter_bide_pydantic_ai.py``). ``$BIDE_CHAOS_DB`` names a PostgreSQL journal.
"""

from __future__ import annotations

import asyncio
import os
from importlib.metadata import version as _pkg_version
from typing import Any

import workload as W
from agents import Agent, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage
from bide_chaos_common import CTX, charge_recorded, drive, store_summary, watch

from adapters.openai_agents import DurableSDKAgent, call_context
from runtime import Safety

__all__ = ["attempt", "charge_recorded", "store_summary", "version"]

NAME = "bide + OpenAI Agents SDK (DurableSDKAgent, SIDE_EFFECT charge, ledger reconciler)"
DURABILITY = (
    f"bide journal ({'PostgreSQL' if os.environ.get('BIDE_CHAOS_DB') else 'SQLite'}); the SDK "
    "agent's model and function tools run by adapters.openai_agents.DurableSDKAgent; charge = "
    "SIDE_EFFECT"
)
RESUME = (
    "durable.run(run_id, input) (start or resume); if halted: ledger reconciler -> "
    "journal.resolve(attempt=...) -> durable.resume()"
)
INPUT = "charge alice 42"


def version() -> str:
    return f"bide {_pkg_version('bide')}, openai-agents {_pkg_version('openai-agents')}"


def _outputs(items: Any) -> set[str]:
    return {
        item.get("call_id")
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


class ScriptedModel(Model):
    async def get_response(self, system_instructions, input, model_settings, tools,  # type: ignore[no-untyped-def]
                           output_schema, handoffs, tracing, **kw):  # fmt: skip
        outs = _outputs(input)
        has_lookup, has_charge = "call_lookup" in outs, "call_charge" in outs
        if not has_lookup:
            W.point("run_start")
        if has_charge:
            W.after_recorded_point(lambda: charge_recorded(CTX["workdir"], CTX["run_id"]))
        await asyncio.sleep(W.MODEL_S)
        decided = W.decide(has_lookup, has_charge)
        if decided == "lookup":
            out = [function_call("lookup", W.LOOKUP_ARGS, call_id="call_lookup")]
        elif decided == "charge":
            out = [function_call("charge", W.CHARGE_ARGS, call_id="call_charge")]
        else:
            W.point("before_finish_return")
            out = [assistant_message("done: charged alice 42", item_id="msg_final")]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def lookup(customer: str) -> str:
    """Look up a customer record (read-only)."""
    return W.lookup_impl(customer)


@function_tool
def charge(customer: str, amount: int) -> str:
    """Charge the customer's card (NOT idempotent)."""
    return W.charge_impl(customer, amount, call_context().idempotency_key)


agent = Agent(
    name="payer", instructions="Charge the customer.", model=ScriptedModel(), tools=[lookup, charge]
)
durable = DurableSDKAgent(agent, tools={"lookup": Safety.READ_ONLY})


def attempt(workdir: str, run_id: str, attempt_no: int) -> str:
    watch()
    CTX.update(workdir=workdir, run_id=run_id)
    result = asyncio.run(drive(durable, workdir, run_id, INPUT))
    output = str(result.output or "")
    assert output.startswith("done"), output
    return output
