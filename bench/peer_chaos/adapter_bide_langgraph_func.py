"""The peer chaos harness's LangGraph Functional API workload, its tool task guarded by bide
(``adapters.langgraph``).

The same code as the harness's plain ``adapter_langgraph_func``: an ``@entrypoint`` that calls
the scripted model task (imported from that adapter) and a ``@task`` per tool call, with
``SqliteSaver`` and ``durability="sync"``, resumed by ``invoke(None)`` on the same thread. The
one change: the tool task runs its call through ``guard.invoke``, keyed by thread and tool-call
id. Halts are settled as in ``adapter_bide_langgraph.py``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import adapter_bide_langgraph as graph_adapter
import adapter_langgraph_func as plain
import workload as W
from bide_chaos_common import db, watch
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.graph.message import add_messages

from adapters.langgraph import ToolGuard, ToolHalted
from runtime import Safety

__all__ = ["attempt", "charge_recorded", "store_summary", "version"]

NAME = "bide + LangGraph Functional API (guard.invoke in the tool @task, ledger reconciler)"
DURABILITY = graph_adapter.DURABILITY.replace("ToolGuard", "ToolGuard.invoke")
RESUME = graph_adapter.RESUME
TOOLS = {"lookup": graph_adapter.lookup, "charge": graph_adapter.charge}


def version() -> str:
    return graph_adapter.version()


def _agent(guard: ToolGuard, saver: SqliteSaver) -> Any:
    @task
    def call_tool(tool_call: Any) -> ToolMessage:
        return guard.invoke(TOOLS[tool_call["name"]], tool_call)

    @entrypoint(checkpointer=saver)
    def agent(messages: list[BaseMessage]) -> Any:
        resp = plain.call_model(messages).result()
        while resp.tool_calls:
            results = [call_tool(tc).result() for tc in resp.tool_calls]
            messages = add_messages(messages, [resp, *results])  # type: ignore[assignment]
            resp = plain.call_model(messages).result()
        return add_messages(messages, [resp])

    return agent


def attempt(workdir: str, run_id: str, attempt_no: int) -> str:
    watch()
    plain._CTX.update(workdir=workdir, run_id=run_id)
    conn = sqlite3.connect(plain._db(workdir), check_same_thread=False)
    try:
        with ToolGuard(db(workdir), tools={"lookup": Safety.READ_ONLY}) as guard:
            agent = _agent(guard, SqliteSaver(conn))
            cfg = {"configurable": {"thread_id": run_id}}
            first = agent.get_state(cfg).created_at is None
            W.trace("START_NEW" if first else "RESUME")
            for _ in range(5):
                try:
                    if first:
                        out = agent.invoke(
                            [HumanMessage("charge alice 42")], cfg, durability="sync"
                        )
                    else:
                        out = agent.invoke(None, cfg, durability="sync")
                    break
                except ToolHalted as halted:
                    first = False
                    W.trace(f"HALTED {halted.run_id}")
                    said = graph_adapter.reconcile_sync(workdir, str(halted.run_id))
                    W.trace(f"RECONCILED {said}")
            else:
                raise AssertionError("still halted after 5 reconciliations")
    finally:
        conn.close()
    final = out[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls, final
    return str(final.content)


def charge_recorded(workdir: str, run_id: str) -> bool:
    return plain.charge_recorded(workdir, run_id)


def store_summary(workdir: str, run_id: str) -> dict[str, Any]:
    summary: dict[str, Any] = plain.store_summary(workdir, run_id)
    summary["bide"] = graph_adapter.guard_statuses(workdir, run_id)
    return summary
