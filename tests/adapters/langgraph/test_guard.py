"""bide's LangGraph guard with real LangGraph code (a StateGraph with the prebuilt ToolNode, the
Functional API's ``@entrypoint``/``@task``, SqliteSaver checkpoints); only the model is
scripted, by LangChain's ``GenericFakeChatModel``. On SQLite and PostgreSQL: a lost reply halts
the charge across LangGraph's replays until the CLI resolves it; a finished call is never run
again; a tool's reported failure is recorded and replayed; async graphs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from adapters.langgraph import ToolGuard, ToolHalted, call_context, guard_run_id
from runtime import ConfigError, Journal, Safety
from tests.cli.invoke import child
from tests.conftest import child_env

LOOKUP = {"name": "lookup", "args": {"customer": "ann"}, "id": "c_lookup"}
CHARGE = {"name": "charge", "args": {"customer": "ann", "cents": 500}, "id": "c_charge"}


class Provider:
    """The payment provider: its ledger of charges (by bide's key), and whether it loses the
    reply of the next charge."""

    def __init__(self) -> None:
        self.charges: list[str] = []
        self.looked_up = 0
        self.drop_reply = False


@pytest.fixture
def provider() -> Provider:
    return Provider()


def tools(provider: Provider) -> list[Any]:
    @tool
    def lookup(customer: str) -> str:
        """A customer's card status (read-only)."""
        provider.looked_up += 1
        return f"{customer}: card ok"

    @tool
    def charge(customer: str, cents: int) -> str:
        """Charge a customer's card (a side effect)."""
        provider.charges.append(call_context().idempotency_key)
        if provider.drop_reply:
            raise ConnectionError("the provider's reply was lost after the charge was sent")
        return f"charged {cents}"

    return [lookup, charge]


def model() -> GenericFakeChatModel:
    return GenericFakeChatModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[LOOKUP]),
                AIMessage("", tool_calls=[CHARGE]),
                AIMessage("done"),
            ]
        )
    )


def graph(guard: ToolGuard, provider: Provider, saver: SqliteSaver) -> Any:
    chat = model()
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {"messages": [chat.invoke(state["messages"])]})
    node = ToolNode(
        tools(provider),
        wrap_tool_call=guard.wrap_tool_call,
        awrap_tool_call=guard.awrap_tool_call,
    )
    builder.add_node("tools", node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


CFG: Any = {"configurable": {"thread_id": "t-1"}}
POLICY = {"lookup": Safety.READ_ONLY}


def test_a_lost_reply_halts_across_replays_until_the_cli_resolves_it(
    db: str, provider: Provider, saver: SqliteSaver
) -> None:
    """The charge's reply is lost: the guard raises ToolHalted, and replaying the thread halts
    again without charging; once the CLI resolves the call, the replay finishes the graph with
    the resolved result. One charge, under bide's key for (thread, call id)."""
    provider.drop_reply = True
    with ToolGuard(db, tools=POLICY) as guard:
        app = graph(guard, provider, saver)
        with pytest.raises(ToolHalted) as halted:
            app.invoke({"messages": [HumanMessage("Charge ann 5.00")]}, CFG)
        run_id = guard_run_id("t-1", "c_charge")
        assert (halted.value.run_id, halted.value.call_id) == (run_id, "c_charge")
        with pytest.raises(ToolHalted):
            app.invoke(None, CFG)
        assert len(provider.charges) == 1
        listed = child("list", "--db", db)
        assert listed.code == 0 and run_id in listed.out and "halted" in listed.out
        shown = child("show", run_id, "--db", db)
        assert "halted" in shown.out and "c_charge" in shown.out, shown.err + shown.out
        resolved = child(
            "resolve", run_id, "c_charge", "--succeeded", '"charged 500"',
            "--by", "oncall", "--db", db,
        )  # fmt: skip
        assert resolved.code == 0, resolved.err
        # The call's run is a child of the thread's, which is no run here: the graph goes on.
        assert "langgraph:t-1 (not a run of this journal" in resolved.out, resolved.out
        assert "invoke its graph again" in resolved.out
        out = app.invoke(None, CFG)
    messages: list[BaseMessage] = out["messages"]
    charged = [m for m in messages if isinstance(m, ToolMessage) and m.name == "charge"]
    assert [m.content for m in charged] == ["charged 500"]
    assert messages[-1].content == "done"
    assert len(provider.charges) == 1 and provider.looked_up == 1


async def test_an_async_graph_replays_a_finished_call_without_running_it(
    tmp_path: Path, provider: Provider
) -> None:
    """A guarded call whose result bide holds is answered from the journal, even when a new
    checkpointer (a lost checkpoint) makes LangGraph run the whole thread again."""
    from langgraph.checkpoint.memory import InMemorySaver

    with ToolGuard(tmp_path / "bide.db", tools=POLICY) as guard:
        for _ in range(2):
            app = graph(guard, provider, InMemorySaver())  # type: ignore[arg-type]
            out = await app.ainvoke({"messages": [HumanMessage("Charge ann 5.00")]}, CFG)
            assert out["messages"][-1].content == "done"
    assert len(provider.charges) == 1 and provider.looked_up == 1  # a recorded result: replayed


def test_a_task_guards_its_call_and_a_reported_failure_is_replayed(
    tmp_path: Path, provider: Provider, saver: SqliteSaver
) -> None:
    """In the Functional API, ``guard.invoke`` in a ``@task``: a tool that raises
    ToolException reported a failure; bide records it once and every replay raises it again
    without running the tool."""
    by_name = {t.name: t for t in tools(provider)}
    failures: list[int] = []

    @tool
    def refund(cents: int) -> str:
        """Refund a customer (a side effect) that reports a failure."""
        failures.append(cents)
        raise ToolException("refunds are closed today")

    by_name["refund"] = refund
    with ToolGuard(tmp_path / "bide.db", tools=POLICY) as guard:

        @task
        def call_tool(tool_call: dict[str, Any]) -> ToolMessage:
            return guard.invoke(by_name[tool_call["name"]], tool_call)  # type: ignore[arg-type]

        @entrypoint(checkpointer=saver)
        def agent(calls: list[dict[str, Any]]) -> list[BaseMessage]:
            messages: list[BaseMessage] = []
            for call in calls:
                messages = add_messages(messages, [call_tool(call).result()])  # type: ignore[assignment]
            return messages

        calls = [LOOKUP, CHARGE]
        out = agent.invoke(calls, CFG)
        assert [m.content for m in out] == ["ann: card ok", "charged 500"]
        again = agent.invoke(calls, {"configurable": {"thread_id": "t-1"}})
        assert [m.content for m in again] == ["ann: card ok", "charged 500"]
        refund_call = {"name": "refund", "args": {"cents": 300}, "id": "c_refund"}
        for thread in ("t-2", "t-2"):
            with pytest.raises(ToolException, match="refunds are closed"):
                agent.invoke([refund_call], {"configurable": {"thread_id": thread}})
    assert len(provider.charges) == 1 and failures == [300]


def test_a_graph_without_a_thread_is_refused(tmp_path: Path, provider: Provider) -> None:
    with ToolGuard(tmp_path / "bide.db") as guard:
        app = graph(guard, provider, None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="thread_id"):
            app.invoke({"messages": [HumanMessage("Charge ann 5.00")]})
    assert provider.charges == []


async def test_each_call_is_a_run_of_its_own_keyed_by_thread_and_call(
    tmp_path: Path, provider: Provider, saver: SqliteSaver
) -> None:
    with ToolGuard(tmp_path / "bide.db", tools=POLICY) as guard:
        graph(guard, provider, saver).invoke({"messages": [HumanMessage("Charge ann")]}, CFG)
    async with Journal(tmp_path / "bide.db") as journal:
        state = await journal.require(guard_run_id("t-1", "c_charge"))
        assert state.status() == "completed"
        assert state.calls["c_charge"].result is not None
        assert state.end is not None
        assert state.end.payload["output"] == {"content": "charged 500", "status": "success"}
    assert guard_run_id("a/b", "c") != guard_run_id("a", "b/c")


EXITING_TOOL = """
import sys
from langchain_core.tools import tool
from adapters.langgraph import ToolGuard
from runtime import Safety

exits = [3]

@tool
def lookup(customer: str) -> str:
    '''A customer's card status (read-only); the first call exits the program.'''
    if exits:
        sys.exit(exits.pop())
    return customer + ": card ok"

call = {"name": "lookup", "args": {"customer": "ann"}, "id": "c_lookup", "type": "tool_call"}
config = {"configurable": {"thread_id": "t-1"}}
with ToolGuard(sys.argv[1], tools={"lookup": Safety.READ_ONLY}) as guard:
    try:
        guard.invoke(lookup, call, config)
    except SystemExit as exc:
        print("raised SystemExit", exc.code)
    print("then", guard.invoke(lookup, call, config).content)
print("closed")
"""


def test_a_tool_that_exits_raises_in_its_caller_and_the_guard_serves_on(tmp_path: Path) -> None:
    """A tool that calls ``sys.exit()`` ends the guard's event loop with its SystemExit: the
    caller gets the SystemExit, the loop runs again for the next call, and the guard closes.
    (Left stopped, the caller waited forever for a thread that had ended without a word.)"""
    script = tmp_path / "exiting.py"
    script.write_text(EXITING_TOOL)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "bide.db")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n") == ["raised SystemExit 3", "then ann: card ok", "closed", ""]
