"""The peer chaos harness's LangGraph workload, its tool node guarded by bide
(``adapters.langgraph``).

The same LangGraph code as the harness's plain ``adapter_langgraph_graph``: a ``StateGraph``
with its scripted model node (imported from that adapter: its crash points and latency), a
prebuilt ``ToolNode`` and ``SqliteSaver`` with ``durability="sync"``, resumed as LangGraph
documents (``invoke(None)`` on the same thread). The one change: the tool node runs its calls
through ``ToolGuard`` (``wrap_tool_call``), keyed by thread and tool-call id; ``lookup`` is
READ_ONLY, ``charge`` keeps the default SIDE_EFFECT and hands bide's idempotency key to the
ledger. A guarded charge whose outcome is unknown raises ``ToolHalted``; the ledger reconciler
settles it (as in ``adapter_bide_pydantic_ai.py``) and the graph is invoked again. The bide
journal is a SQLite file in the schedule's work dir, or the PostgreSQL database named by
``$BIDE_CHAOS_DB``; LangGraph's checkpoints stay in SQLite either way.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from importlib.metadata import version as _pkg_version
from typing import Any

import adapter_langgraph_graph as plain
import workload as W
from bide_chaos_common import db, pg, reconcile, run_status, watch
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapters.langgraph import ToolGuard, ToolHalted, call_context, guard_run_id
from runtime import Journal, Safety

__all__ = ["attempt", "charge_recorded", "store_summary", "version"]

NAME = "bide + LangGraph (ToolGuard on the ToolNode, SIDE_EFFECT charge, ledger reconciler)"
DURABILITY = (
    f"SqliteSaver (WAL), durability='sync'; tool calls journaled by bide "
    f"({'PostgreSQL' if pg() else 'SQLite'}) through adapters.langgraph.ToolGuard"
)
RESUME = (
    "get_state(thread_id): no checkpoint -> invoke(input); otherwise invoke(None); on "
    "ToolHalted: ledger reconciler -> journal.resolve(attempt=...) -> invoke(None) again"
)


def version() -> str:
    return f"bide {_pkg_version('bide')}, {plain.version()}"


@tool
def lookup(customer: str) -> str:
    """Look up a customer record (read-only)."""
    return W.lookup_impl(customer)


@tool
def charge(customer: str, amount: int) -> str:
    """Charge the customer's card (NOT idempotent)."""
    return W.charge_impl(customer, amount, call_context().idempotency_key)


def _graph(guard: ToolGuard, conn: sqlite3.Connection) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", plain.model)
    builder.add_node("tools", ToolNode([lookup, charge], wrap_tool_call=guard.wrap_tool_call))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=SqliteSaver(conn))


def reconcile_sync(workdir: str, run_id: str) -> list[str]:
    """The ledger reconciler on the halted guarded call's run, from a journal of its own."""

    async def settle() -> list[str]:
        async with Journal(db(workdir)) as journal:
            return await reconcile(journal, run_id, os.environ["CHAOS_LEDGER"])

    return asyncio.run(settle())


def guard_statuses(workdir: str, run_id: str) -> dict[str, Any]:
    """The status of each guarded call's run of the thread ``run_id``. Read without a Journal:
    the harness calls this in its parent, which then forks, and a fork must not inherit an
    engine's threads."""
    return {c: run_status(workdir, guard_run_id(run_id, c)) for c in ("call_lookup", "call_charge")}


def attempt(workdir: str, run_id: str, attempt_no: int) -> str:
    watch()
    plain._CTX.update(workdir=workdir, run_id=run_id)
    conn = sqlite3.connect(plain._db(workdir), check_same_thread=False)
    try:
        with ToolGuard(db(workdir), tools={"lookup": Safety.READ_ONLY}) as guard:
            graph = _graph(guard, conn)
            cfg = {"configurable": {"thread_id": run_id}}
            first = graph.get_state(cfg).created_at is None
            W.trace("START_NEW" if first else "RESUME")
            for _ in range(5):
                try:
                    if first:
                        out = graph.invoke(
                            {"messages": [HumanMessage("charge alice 42")]}, cfg, durability="sync"
                        )
                    else:
                        out = graph.invoke(None, cfg, durability="sync")
                    break
                except ToolHalted as halted:
                    first = False
                    W.trace(f"HALTED {halted.run_id}")
                    said = reconcile_sync(workdir, str(halted.run_id))
                    W.trace(f"RECONCILED {said}")
            else:
                raise AssertionError("still halted after 5 reconciliations")
    finally:
        conn.close()
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls, final
    return str(final.content)


def charge_recorded(workdir: str, run_id: str) -> bool:
    return plain.charge_recorded(workdir, run_id)


def store_summary(workdir: str, run_id: str) -> dict[str, Any]:
    summary: dict[str, Any] = plain.store_summary(workdir, run_id)
    summary["bide"] = guard_statuses(workdir, run_id)
    return summary
