"""A LangGraph thread agent for the adapter's tests, rebuilt by the CLI and workers as
``tests.adapters.langgraph.graphs:thread``: real LangGraph code (a ``StateGraph`` with the
prebuilt ``ToolNode`` guarded by bide, ``SqliteSaver`` checkpoints), only the model scripted
(LangChain's ``GenericFakeChatModel``, given the answer the thread's messages call for, so that
a graph built in another process answers alike). The journal and the checkpoints are named by
``$BIDE_TEST_LG_JOURNAL`` and ``$BIDE_TEST_LG_CHECKPOINTS``; each charge goes to the test
provider (``tests.adapters.provider``)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapters.langgraph import GraphAgent, ToolGuard, call_context
from runtime import Safety
from tests.adapters import provider

SPEC = "tests.adapters.langgraph.graphs:thread"
JOURNAL = "BIDE_TEST_LG_JOURNAL"
CHECKPOINTS = "BIDE_TEST_LG_CHECKPOINTS"

LOOKUP = {"name": "lookup", "args": {"customer": "ann"}, "id": "c_lookup"}
CHARGE = {"name": "charge", "args": {"customer": "ann", "cents": 500}, "id": "c_charge"}


@tool
def lookup(customer: str) -> str:
    """A customer's card status (read-only)."""
    return f"{customer}: card ok"


@tool
def charge(customer: str, cents: int) -> str:
    """Charge a customer's card (a side effect), under bide's key for the call."""
    provider.charge(customer, cents, call_context().idempotency_key)
    return f"charged {cents}"


def model(state: MessagesState) -> dict[str, Any]:
    """Look up, charge, then say what the charge returned."""
    done = {m.name: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    if "lookup" not in done:
        answer = AIMessage("", tool_calls=[LOOKUP])
    elif "charge" not in done:
        answer = AIMessage("", tool_calls=[CHARGE])
    else:
        answer = AIMessage(f"done: {done['charge']}")
    chat = GenericFakeChatModel(messages=iter([answer]))
    return {"messages": [chat.invoke(state["messages"])]}


def build(guard: ToolGuard, saver: SqliteSaver) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node(
        "tools",
        ToolNode(
            [lookup, charge],
            wrap_tool_call=guard.wrap_tool_call,
            awrap_tool_call=guard.awrap_tool_call,
        ),
    )
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


@asynccontextmanager
async def thread() -> AsyncIterator[GraphAgent]:
    """The thread agent, its guard and checkpoints open for as long as it drives."""
    conn = sqlite3.connect(os.environ[CHECKPOINTS], check_same_thread=False)
    try:
        with ToolGuard(os.environ[JOURNAL], tools={"lookup": Safety.READ_ONLY}) as guard:
            saver = SqliteSaver(conn)
            yield GraphAgent(build(guard, saver), guard=guard)
    finally:
        conn.close()
