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
import concurrent.futures
import os
import sqlite3
import time
from importlib.metadata import version as _pkg_version
from typing import Any

import workload as W
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
from runtime import Journal, Resolution, RunStatus, Safety
from runtime.tools import idempotency_key_for

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
_CTX: dict[str, str] = {}


def _pg() -> str | None:
    return os.environ.get("BIDE_CHAOS_DB") or None


DURABILITY = DURABILITY.format("PostgreSQL" if _pg() else "SQLite (WAL, synchronous=FULL)")


def version() -> str:
    return f"bide {_pkg_version('bide')}, pydantic-ai-slim {_pkg_version('pydantic-ai-slim')}"


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    has_lookup = any(p.tool_name == "lookup" for p in returns)
    has_charge = any(p.tool_name == "charge" for p in returns)
    if not has_lookup:
        W.point("run_start")
    if has_charge:
        W.after_recorded_point(lambda: charge_recorded(_CTX["workdir"], _CTX["run_id"]))
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


def _db(workdir: str) -> str:
    return _pg() or os.path.join(workdir, "bide.sqlite")


async def reconcile(journal: Journal, run_id: str, ledger: str) -> list[str]:
    """For each halted charge, find its idempotency key in the ledger and say what happened."""
    said = []
    state = await journal.require(run_id)
    for halted in state.halted_calls():
        call = halted.call
        key = idempotency_key_for(run_id, call.id)
        line = W.ledger_find_key(ledger, key)
        if line is not None:
            res = Resolution.succeeded(f"charged {line['customer']} {line['amount']}")
            evidence = f"ledger line attempt={line['attempt']} carries key {key}"
        else:
            res, evidence = Resolution.not_executed(), f"no ledger line carries key {key}"
        # The verdict is on the attempt that halted (a call resolved not-executed and tried
        # again is on attempt 2 or later, and bide refuses a verdict that names no attempt).
        new = await journal.resolve(
            run_id,
            call.id,
            res,
            attempt=halted.attempt,
            by="ledger-reconciler",
            evidence=evidence,
        )
        said.append(f"{call.id}@{halted.attempt}:{res.outcome}:{'new' if new else 'noop'}")
    return said


async def _attempt(workdir: str, run_id: str) -> str:
    async with Journal(_db(workdir)) as journal:
        state = await journal.state(run_id)
        W.trace("START_NEW" if state is None else f"RESUME status={state.status()}")
        result = await durable.run(run_id, INPUT, journal=journal)
        rounds = 0
        while result.status == RunStatus.HALTED:
            rounds += 1
            assert rounds <= 5, result
            W.trace(f"HALTED {[h.call_id for h in result.halts]}")
            said = await reconcile(journal, run_id, os.environ["CHAOS_LEDGER"])
            W.trace(f"RECONCILED {said}")
            result = await durable.resume(run_id, journal=journal)
        assert result.status == RunStatus.COMPLETED, result
        output = durable.output(result)
        assert output.startswith("done"), output
        return str(output)


def attempt(workdir: str, run_id: str, attempt_no: int) -> str:
    _CTX.update(workdir=workdir, run_id=run_id)
    return asyncio.run(_attempt(workdir, run_id))


def _rows(workdir: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    url = _pg()
    if url is None:
        conn = sqlite3.connect(_db(workdir), timeout=10)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    async def query() -> list[tuple[Any, ...]]:
        import asyncpg

        numbered = sql
        for i in range(len(args)):
            numbered = numbered.replace("?", f"${i + 1}", 1)
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return [tuple(r) for r in await conn.fetch(numbered, *args)]
        finally:
            await conn.close()

    # Called from inside the drive's event loop (the model function): query from another one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, query()).result(timeout=30)


def charge_recorded(workdir: str, run_id: str) -> bool:
    keys = _rows(workdir, "select key from bide_records where run_id = ?", (run_id,))
    return any(k.startswith("result/call_charge/") for (k,) in keys)


def store_summary(workdir: str, run_id: str) -> dict[str, Any]:
    if _pg() is None and not os.path.exists(_db(workdir)):
        return {"db": None}
    keys = [
        k
        for (k,) in _rows(
            workdir, "select key from bide_records where run_id = ? order by seq", (run_id,)
        )
    ]
    status = _rows(workdir, "select status from bide_runs where run_id = ?", (run_id,))
    return {"status": status[0][0] if status else None, "records": keys}
