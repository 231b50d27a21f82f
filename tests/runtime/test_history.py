"""History chunks (``runtime.history``): a drive resumes from them and the records after them,
and what it resumes from agrees with the fold of every record; the records stay the truth."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    CorruptJournal,
    Journal,
    Resolution,
    RunStatus,
    Safety,
    StorageError,
    ToolContext,
    history,
    single_approval,
    tool,
)
from runtime import records as R
from runtime.journal import Store
from runtime.loop import replay
from runtime.state import RunState
from runtime.testing import ScriptedModel
from runtime.turns import Conversation
from tests.helpers import Ledger, call, inject, make_tools


@pytest.fixture
def every(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_to(turns: int) -> None:
        monkeypatch.setattr(history, "EVERY", turns)

    return set_to


def lookups(n: int) -> list[dict[str, Any]]:
    steps = [{"tool_calls": [call(f"c{i}", "lookup", customer=f"k{i}")]} for i in range(n)]
    return [*steps, {"text": f"looked {n} up"}]


def seen(state: RunState) -> dict[str, Any]:
    """Everything a drive asks of the state it resumes from (the conversation once every call
    has its result: only then is the model shown it)."""
    messages = Conversation().messages(state) if not state.pending_calls() else ()
    return {
        "turns": [t.to_json() for t in state.turns],
        "usage": state.usage,
        "status": state.status(),
        "pending": [c.call.id for c in state.pending_calls()],
        "start": state.start,
        "end": state.end,
        "cancel": state.cancel,
        "stop": state.stop,
        "chunked": state.chunked,
        "messages": [repr(m) for m in messages],
    }


async def agrees(journal: Journal, run_id: str) -> RunState:
    """The state a drive resumes from agrees with the fold of every record; it is returned."""
    resumed = await replay(journal.store, run_id)
    folded = await journal.require(run_id)
    assert seen(resumed) == seen(folded)
    for c in folded.calls.values():
        assert resumed.knows_call(c.call.id)
    assert not resumed.knows_call("c-never")
    assert folded.anomalies() == []
    return resumed


async def test_a_long_run_keeps_its_settled_turns_in_chunks(journal: Journal, every: Any) -> None:
    every(3)
    model = ScriptedModel(lookups(10))
    result = await Agent(model=model, tools=list(make_tools(Ledger()).values())).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.COMPLETED and result.turns == 11
    chunks = await journal.store.load("r", prefix="history/")
    assert [c.key for c in chunks] == [R.history_key(n) for n in (3, 6, 9)]
    assert [(c.payload["first"], c.payload["last"]) for c in chunks] == [(1, 3), (4, 6), (7, 9)]
    resumed = await agrees(journal, "r")
    assert resumed.history is not None and len(resumed.turns.live) == 2  # turns 10 and 11


async def test_a_drive_resumes_from_the_chunks_and_the_records_after_them(
    journal: Journal, every: Any
) -> None:
    """Writes: create, start, then each turn with its lookup's result, a chunk riding with
    turns 4 and 7. Write 9 (turn 7 with its chunk and result) fails: the resume reads the
    chunk of turns 1-3 and what follows it, and asks the model for turn 7 on."""
    every(3)
    ledger = Ledger()
    inject(journal, 9, after_commit=False)
    with pytest.raises(StorageError):
        await Agent(model=ScriptedModel(lookups(8)), tools=list(make_tools(ledger).values())).run(
            "r", "go", journal=journal
        )
    async with Journal(journal.path) as fresh:
        reads = spy_loads(fresh)
        model = ScriptedModel(lookups(8))
        result = await Agent(model=model, tools=list(make_tools(ledger).values())).resume(
            "r", journal=fresh
        )
        chunks = await fresh.store.load("r", prefix="history/")
        await agrees(fresh, "r")
    assert result.status is RunStatus.COMPLETED and result.output == "looked 8 up"
    assert model.calls == 3, "turns 7, 8 and the answer: nothing recorded is asked again"
    assert [c.key for c in chunks] == [R.history_key(3), R.history_key(6)]
    assert reads[:2] == [{"prefix": "history/"}, {"after": chunks[0].seq}], "never every record"
    assert ledger.count("lookup") == 8 + 1  # c6 ran, and again: its turn was never recorded


def spy_loads(journal: Journal) -> list[dict[str, Any]]:
    reads: list[dict[str, Any]] = []
    inner: Store = journal.store
    real = inner.load

    async def load(run_id: str, **kw: Any) -> Any:
        reads.append(kw)
        return await real(run_id, **kw)

    inner.load = load  # type: ignore[method-assign]
    return reads


async def test_what_a_drive_resumes_from_agrees_with_the_records_at_every_stop(
    journal: Journal, every: Any
) -> None:
    """A chunk every turn, across an approval, a question, a halt and its resolution."""
    every(1)
    ledger = Ledger()
    tools = make_tools(ledger)

    @tool(safety=Safety.READ_ONLY)
    async def ask(context: ToolContext) -> str:
        """Asks a person which plan."""
        plan: str = await context.interrupt("plan", "which plan?")
        return plan

    @tool(safety=Safety.SIDE_EFFECT)
    async def ship(context: ToolContext) -> str:
        """Ships, and never says whether it did."""
        ledger.executions.append(("ship", {}, context.idempotency_key))
        raise TimeoutError

    @tool(safety=Safety.SIDE_EFFECT, approval=single_approval())
    async def refund() -> str:
        """Refunds, once approved."""
        return "refunded"

    script = [
        {
            "tool_calls": [
                call("c1", "lookup", customer="ann"),
                call("c2", "upsert", customer="a", note="n"),
            ]
        },
        {"tool_calls": [call("c3", "ask")]},
        {"tool_calls": [call("c4", "charge", customer="ann", amount=5)]},
        {"tool_calls": [call("c5", "ship")]},
        {"tool_calls": [call("c6", "refund")]},
        {"text": "done"},
    ]
    agent = Agent(model=ScriptedModel(script), tools=[*tools.values(), ask, ship, refund])
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.WAITING
    await agrees(journal, "r")
    await journal.answer("r", "plan", "pro")
    assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED
    resumed = await agrees(journal, "r")
    assert [c.call.id for c in resumed.halted_calls()] == ["c5"]
    await journal.resolve("r", "c5", Resolution.succeeded("shipped"), by="ops")
    assert (await agent.resume("r", journal=journal)).status is RunStatus.WAITING
    await agrees(journal, "r")
    await journal.approve("r", "c6", by="alice")
    result = await agent.resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and result.turns == 6
    resumed = await agrees(journal, "r")
    assert resumed.chunked == 5 and ledger.count("charge") == 1 and ledger.count("ship") == 1


def tamper(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)


async def halted_after_chunks(db: Path, every: Any) -> Agent:
    """A run of three lookups (a chunk of turns 1-2 rides with turn 3), then a charge that
    leaves no result: it halts."""
    every(2)

    @tool(safety=Safety.SIDE_EFFECT)
    async def pay() -> str:
        """Never says whether it paid."""
        raise TimeoutError

    script = [*lookups(3)[:-1], {"tool_calls": [call("c9", "pay")]}, {"text": "done"}]
    agent = Agent(model=ScriptedModel(script), tools=[make_tools(Ledger())["lookup"], pay])
    async with Journal(db) as journal:
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.HALTED
        assert [c.key for c in await journal.store.load("r", prefix="history/")] == [
            R.history_key(2)
        ]
    return agent


async def test_a_damaged_chunk_is_read_only_when_its_turns_are_and_then_named(
    db_path: Path, every: Any
) -> None:
    agent = await halted_after_chunks(db_path, every)
    tamper(db_path, "UPDATE bide_records SET payload = json_set(payload, '$.turns', '[[') "
           "WHERE kind = 'history'")  # fmt: skip
    async with Journal(db_path) as journal:
        # A drive that halts again never reads the settled turns.
        assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED
        await journal.resolve("r", "c9", Resolution.succeeded("charged"), by="ops")
        with pytest.raises(CorruptJournal, match=r"history chunk 'history/0000000002' \(seq \d+\)"):
            await agent.resume("r", journal=journal)  # the model is shown them: they are read
        (anomaly,) = (await journal.require("r")).anomalies()
        assert (
            anomaly.startswith("history chunk history/0000000002") and "cannot be read" in anomaly
        )


async def test_a_chunk_that_says_otherwise_than_the_records_is_flagged(
    db_path: Path, every: Any
) -> None:
    await halted_after_chunks(db_path, every)
    tamper(db_path, "UPDATE bide_records SET payload = replace(payload, 'pro', 'free') "
           "WHERE kind = 'history'")  # fmt: skip
    async with Journal(db_path) as journal:
        (anomaly,) = (await journal.require("r")).anomalies()
    assert "disagrees with the records: the results of turn 1 are not those recorded" in anomaly


async def test_chunks_of_another_version_are_left_to_the_records(db_path: Path, every: Any) -> None:
    agent = await halted_after_chunks(db_path, every)
    tamper(db_path, "UPDATE bide_records SET payload = json_set(payload, '$.v', 99) "
           "WHERE kind = 'history'")  # fmt: skip
    async with Journal(db_path) as journal:
        resumed = await replay(journal.store, "r")
        assert resumed.history is None and len(resumed.turns.live) == 4
        await journal.resolve("r", "c9", Resolution.succeeded("charged"), by="ops")
        result = await agent.resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and result.output == "done"


async def test_a_late_record_of_a_settled_call_changes_nothing_a_drive_resumes_from(
    journal: Journal, every: Any
) -> None:
    """A decision recorded after the gate was decided names a call whose turn is in a chunk by
    then: the resumed state, which keeps no call of the chunks, passes over it as the fold of
    every record does (it is recorded, not counted)."""
    every(1)

    @tool(safety=Safety.READ_ONLY, approval=single_approval())
    async def peek() -> str:
        """Looks, once approved."""
        return "seen"

    @tool(safety=Safety.SIDE_EFFECT)
    async def pay() -> str:
        """Never says whether it paid."""
        raise TimeoutError

    script = [
        {"tool_calls": [call("c1", "peek")]},
        {"tool_calls": [call("c2", "lookup", customer="ann")]},
        {"tool_calls": [call("c3", "pay")]},
        {"text": "done"},
    ]
    agent = Agent(model=ScriptedModel(script), tools=[peek, pay, make_tools(Ledger())["lookup"]])
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.WAITING
    await journal.approve("r", "c1", by="alice")
    assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED
    late = await journal.approve("r", "c1", by="bob")
    assert not late.counted
    resumed = await agrees(journal, "r")
    assert resumed.chunked == 2 and "c1" not in resumed.calls and resumed.knows_call("c1")
    assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED


async def test_a_chunk_that_does_not_follow_the_one_before_is_named_when_a_drive_resumes(
    db_path: Path, every: Any
) -> None:
    agent = await halted_after_chunks(db_path, every)
    tamper(db_path, "UPDATE bide_records SET payload = json_set(payload, '$.first', 2) "
           "WHERE kind = 'history'")  # fmt: skip
    async with Journal(db_path) as journal:
        with pytest.raises(CorruptJournal, match="do not follow the chunk before it"):
            await agent.resume("r", journal=journal)
        (anomaly,) = (await journal.require("r")).anomalies()
    assert "disagrees with the records: it holds turns 2 to 2" in anomaly
