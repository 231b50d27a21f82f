"""A LangGraph thread as a bide run (``GraphAgent``), on SQLite and PostgreSQL, with real
LangGraph code (``tests.adapters.langgraph.graphs``; only the model scripted): driven to
completion by a Worker; a charge whose reply is lost halts the thread's run, is resolved with
the real CLI, and the thread is then driven to its end by a Worker or the CLI's ``resume``; the
charge fires once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from adapters.langgraph import GraphAgent, ToolGuard, guard_run_id, thread_run_id
from runtime import ConfigError, Journal, RunStatus, Worker
from tests.adapters.langgraph import graphs
from tests.adapters.provider import DROP_REPLY, LEDGER, ledger_lines
from tests.cli.invoke import child


@pytest.fixture
def env(db: str, ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the thread agent reads (also given to the CLI's child processes)."""
    values = {
        graphs.JOURNAL: db,
        graphs.CHECKPOINTS: str(tmp_path / "checkpoints.db"),
        LEDGER: str(ledger),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


async def until_completed(journal: Journal, run_ids: list[str]) -> None:
    async with asyncio.timeout(60):
        while {await journal.status(r) for r in run_ids} != {"completed"}:
            await asyncio.sleep(0.05)


async def output_of(journal: Journal, run_id: str) -> Any:
    state = await journal.require(run_id)
    assert state.end is not None
    return state.end.payload["output"]


async def test_a_worker_drives_submitted_threads_to_their_end(db: str, env: dict[str, str]) -> None:
    runs = [thread_run_id(f"w-{n}") for n in range(2)]
    async with graphs.thread() as agent, Journal(db) as journal:
        for run_id in runs:
            submitted = await agent.submit(run_id, "Charge ann 5.00", journal=journal)
            assert submitted.status is RunStatus.SUBMITTED
        async with Worker(journal, agent=agent, poll=0.05) as worker:
            await until_completed(journal, runs)
        assert worker.finished == dict.fromkeys(runs, "completed")
        for run_id in runs:
            assert await output_of(journal, run_id) == "done: charged 500"
        # Each guarded call is its thread's child run.
        call = await journal.require(guard_run_id("w-0", "c_charge"))
        assert (call.start or {}).get("parent") == {"run_id": runs[0], "call_id": "c_charge"}
    keys = [line.split()[2] for line in ledger_lines()]
    assert len(keys) == 2 and len(set(keys)) == 2


@pytest.mark.parametrize("driver", ["worker", "cli"])
async def test_a_halted_charge_resolved_from_the_cli_then_the_thread_is_driven_to_its_end(
    db: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, driver: str
) -> None:
    """The charge's reply is lost: the call's run halts, and so does the thread's, both seen by
    ``list``; the CLI resolves the call, and a Worker (or ``python -m runtime resume`` of the
    thread, its agent rebuilt from the journaled spec) continues the thread from LangGraph's
    checkpoint to its answer. One charge."""
    run_id, call_run = thread_run_id("t-1"), guard_run_id("t-1", "c_charge")
    monkeypatch.setenv(DROP_REPLY, "1")
    async with graphs.thread() as agent, Journal(db) as journal:
        result = await agent.run(run_id, "Charge ann 5.00", journal=journal, spec=graphs.SPEC)
        assert result.status is RunStatus.HALTED
        assert [h.call_id for h in result.halts] == ["graph"]
        assert call_run in result.halts[0].cause
    monkeypatch.delenv(DROP_REPLY)
    assert len(ledger_lines()) == 1

    listed = child("list", "--db", db, "--json", **env)
    assert listed.code == 0, listed.err
    status = {r["run_id"]: r["status"] for r in listed.json()["runs"]}
    assert status[run_id] == status[call_run] == "halted"
    if driver == "worker":
        shown = child("show", run_id, "--db", db, **env)
        assert shown.code == 0, shown.err
        assert "halted" in shown.out and call_run in shown.out, shown.out
    resolved = child(
        "resolve", call_run, "c_charge", "--succeeded", '"charged 500"',
        "--evidence", "provider ledger", "--by", "oncall", "--db", db, **env,
    )  # fmt: skip
    assert resolved.code == 0, resolved.err
    assert resolved.out.splitlines()[-1] == (
        f"continue its parent run, which drives it on: python -m runtime resume --db {db} "
        f"{run_id} (or let a worker)"
    ), resolved.out

    if driver == "cli":
        resumed = child("resume", run_id, "--db", db, **env)
        assert resumed.code == 0, resumed.err + resumed.out
    async with graphs.thread() as agent, Journal(db) as journal:
        if driver == "worker":
            async with Worker(journal, agent=agent, poll=0.05):
                await until_completed(journal, [run_id])
        assert await journal.status(run_id) == "completed"
        assert await output_of(journal, run_id) == "done: charged 500"
        assert await journal.status(call_run) == "completed"
    assert len(ledger_lines()) == 1


async def test_a_thread_run_is_named_by_its_thread(tmp_path: Path) -> None:
    with ToolGuard(tmp_path / "bide.db") as guard:
        agent = GraphAgent(lambda: None, guard=guard)
        async with Journal(tmp_path / "bide.db") as journal:
            with pytest.raises(ConfigError, match="langgraph:<thread>"):
                await agent.run("t-1", "hello", journal=journal)
        with pytest.raises(ConfigError, match="ToolGuard"):
            GraphAgent(lambda: None, guard=None)  # type: ignore[arg-type]


async def test_a_graph_that_raises_fails_its_threads_run(tmp_path: Path) -> None:
    """The graph's own failure (not a halt) ends the thread's run failed, with the error; so
    does a graph without a checkpointer, which no later drive could continue."""

    def broken(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError("the model node is broken")

    def build(checkpointer: Any) -> Any:
        graph = StateGraph(MessagesState)
        graph.add_node("model", broken)
        graph.add_edge(START, "model")
        return graph.compile(checkpointer=checkpointer)

    with ToolGuard(tmp_path / "bide.db") as guard:
        async with Journal(tmp_path / "bide.db") as journal:
            for n, (graph, why) in enumerate(
                [
                    (build(InMemorySaver()), "RuntimeError: the model node is broken"),
                    (lambda: build(None), "has no checkpointer"),
                ]
            ):
                agent = GraphAgent(graph, guard=guard)
                result = await agent.run(thread_run_id(f"t-{n}"), "hi", journal=journal)
                assert result.status is RunStatus.FAILED
                assert why in str(result.error)
