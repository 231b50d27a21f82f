"""The peer chaos harness's Pydantic AI workload, run by bide (``adapters.pydantic_ai``).

The same Pydantic AI code as the harness's plain Pydantic AI + DBOS adapter: an
``Agent(FunctionModel(scripted))`` whose model function carries the workload's crash points and
latency, and two function tools (``lookup``, ``charge``). bide drives it through
``DurableAgent``: ``lookup`` is declared READ_ONLY, ``charge`` keeps the default SIDE_EFFECT and
hands bide's idempotency key (``call_context()``) to the ledger, as a payment provider would
store it.

Start / resume: ``durable.run(run_id, input, journal=j)`` starts the run or resumes it. A drive
that stops ``halted`` (the charge's outcome is unknown) is settled by the ledger reconciler: it
finds the call's idempotency key in the ledger (``succeeded``) or not (``not_executed``), tells
bide with ``journal.resolve``, and the run is resumed. The journal is a SQLite file in the
schedule's work dir, or the PostgreSQL database named by ``$BIDE_CHAOS_DB``.

Run it with the harness (``../shared/peer_chaos/``) on its path, from a copy of the harness's
folder: ``python harness.py adapter_bide_pydantic_ai --seeds 200``.
"""

from __future__ import annotations

import asyncio
import time
from importlib.metadata import version as _pkg_version

import workload as W
from bide_chaos_common import CTX, charge_recorded, drive, pg, store_summary, watch
from pydantic_ai import Agent
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

# What the harness calls (NAME, DURABILITY and RESUME are read too).
__all__ = ["attempt", "charge_recorded", "store_summary", "version"]

NAME = "bide + Pydantic AI (DurableAgent, SIDE_EFFECT charge, ledger reconciler)"
DURABILITY = (
    "bide journal ({}); Pydantic AI's model and function tools run by "
    "adapters.pydantic_ai.DurableAgent; charge = SIDE_EFFECT (attempt marker before the call, "
    "halt on a marker without result)"
)
RESUME = (
    "durable.run(run_id, input) (start or resume); if halted: look the charge up in the ledger "
    "by idempotency_key_for(run_id, call_id) -> journal.resolve(succeeded | not_executed) -> "
    "durable.resume()"
)
INPUT = "charge alice 42"


DURABILITY = DURABILITY.format("PostgreSQL" if pg() else "SQLite (WAL, synchronous=FULL)")


def version() -> str:
    return f"bide {_pkg_version('bide')}, pydantic-ai-slim {_pkg_version('pydantic-ai-slim')}"


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    has_lookup = any(p.tool_name == "lookup" for p in returns)
    has_charge = any(p.tool_name == "charge" for p in returns)
    if not has_lookup:
        W.point("run_start")
    if has_charge:
        W.after_recorded_point(lambda: charge_recorded(CTX["workdir"], CTX["run_id"]))
    time.sleep(W.MODEL_S)
    decided = W.decide(has_lookup, has_charge)
    if decided == "lookup":
        call = ToolCallPart("lookup", dict(W.LOOKUP_ARGS), tool_call_id="call_lookup")
        return ModelResponse(parts=[call])
    if decided == "charge":
        call = ToolCallPart("charge", dict(W.CHARGE_ARGS), tool_call_id="call_charge")
        return ModelResponse(parts=[call])
    W.point("before_finish_return")
    return ModelResponse(parts=[TextPart("done: charged alice 42")])


agent = Agent(FunctionModel(scripted_model), name="payer")


@agent.tool_plain
def lookup(customer: str) -> str:
    """Look up a customer record (read-only)."""
    return W.lookup_impl(customer)


@agent.tool_plain
def charge(customer: str, amount: int) -> str:
    """Charge the customer's card (NOT idempotent)."""
    return W.charge_impl(customer, amount, call_context().idempotency_key)


durable = DurableAgent(agent, tools={"lookup": Safety.READ_ONLY})


def attempt(workdir: str, run_id: str, attempt_no: int) -> str:
    watch()
    CTX.update(workdir=workdir, run_id=run_id)
    result = asyncio.run(drive(durable, workdir, run_id, INPUT))
    output = str(durable.typed_output(result) or "")
    assert output.startswith("done"), output
    return output
