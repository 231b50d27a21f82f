"""A turn is written ahead and commits with the record after it: a READ_ONLY call's result (the
call ran meanwhile), a side effect's marker, the end; alone before an IDEMPOTENT call or a wait.
What each ordering means after a crash is in docs/guarantee.md ("A turn commits with the record
after it")."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import (
    Agent,
    Journal,
    RunStatus,
    Safety,
    StorageError,
    ToolContext,
    single_approval,
    tool,
)
from runtime import records as R
from runtime.journal import Store
from runtime.testing import MemoryStore, ScriptedModel
from tests.helpers import Ledger, call, inject, make_tools


class Commits:
    """A Store that writes down, for each append, the keys it commits in one transaction."""

    def __init__(self, inner: Store):
        self._inner = inner
        self.groups: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append(self, run_id: str, key: str, *args: Any, **kwargs: Any) -> Any:
        self.groups.append([e.key for e in kwargs.get("before", ())] + [key])
        return await self._inner.append(run_id, key, *args, **kwargs)


def spied(journal: Journal) -> Commits:
    spy = Commits(journal.store)
    journal._store = spy  # type: ignore[assignment]
    return spy


def one_call(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"tool_calls": [call("c1", name, **arguments)]}, {"text": "done"}]


@pytest.mark.parametrize(
    ("name", "arguments", "groups"),
    [
        # The lookup runs first; its turn commits with its result.
        ("lookup", {"customer": "ann"}, [["start"], ["turn/1", "result/c1/1"]]),
        # The upsert's key is its call's: the turn is durable before the effect.
        (
            "upsert",
            {"customer": "ann", "note": "n"},
            [["start"], ["turn/1"], ["result/c1/1"]],
        ),
        # The marker commits with its turn, before the charge leaves.
        (
            "charge",
            {"customer": "ann", "amount": 5},
            [["start"], ["turn/1", "attempt/c1/1"], ["result/c1/1"]],
        ),
    ],
)
async def test_a_step_commits_its_turn_with_the_first_record_that_must_be_durable(
    journal: Journal, name: str, arguments: dict[str, Any], groups: list[list[str]]
) -> None:
    spy = spied(journal)
    agent = Agent(
        model=ScriptedModel(one_call(name, **arguments)), tools=list(make_tools(Ledger()).values())
    )
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert spy.groups == [*groups, ["turn/2", "end"]], "the final answer commits with the end"


def journal_seen_by(journal: Journal, safety: Safety, seen: list[list[str]]) -> Any:
    @tool(safety=safety, name="probe")
    async def probe(context: ToolContext) -> str:
        """Write down which of the run's records are in the journal as it runs."""
        records = await journal.store.load(context.run_id)
        seen.append([r.key for r in records])
        return "ok"

    return probe


@pytest.mark.parametrize(
    ("safety", "journaled"),
    [
        (Safety.READ_ONLY, ["header", "start"]),
        (Safety.IDEMPOTENT, ["header", "start", "turn/1"]),
        (Safety.SIDE_EFFECT, ["header", "start", "turn/1", "attempt/c1/1"]),
    ],
)
async def test_only_a_read_only_call_runs_before_its_turn_is_in_the_journal(
    journal: Journal, safety: Safety, journaled: list[str]
) -> None:
    seen: list[list[str]] = []
    agent = Agent(
        model=ScriptedModel(one_call("probe")), tools=[journal_seen_by(journal, safety, seen)]
    )
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.COMPLETED
    assert seen == [journaled]


async def test_a_gate_that_waits_commits_the_turn_alone(journal: Journal) -> None:
    ran: list[str] = []

    @tool(safety=Safety.READ_ONLY, approval=single_approval())
    async def lookup() -> str:
        """Needs an approval first."""
        ran.append("lookup")
        return "found"

    spy = spied(journal)
    agent = Agent(model=ScriptedModel(one_call("lookup")), tools=[lookup])
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.WAITING
    assert spy.groups == [["start"], ["turn/1"]]
    assert ran == []


async def test_a_failed_shared_commit_forgets_the_turn_and_the_resume_asks_the_model_again(
    journal: Journal,
) -> None:
    """Writes: create, start, then turn 1 with the lookup's result. When that one fails, nothing
    of the step is recorded: the next drive asks the model for turn 1 again and the lookup runs
    again (it acts on nothing); the charge of turn 2 runs once."""
    ledger = Ledger()
    script = [
        {"tool_calls": [call("c1", "lookup", customer="ann")]},
        {"tool_calls": [call("c2", "charge", customer="ann", amount=5)]},
        {"text": "done"},
    ]
    inject(journal, 3, after_commit=False)
    with pytest.raises(StorageError):
        await Agent(model=ScriptedModel(script), tools=list(make_tools(ledger).values())).run(
            "r", "go", journal=journal
        )
    state = await journal.require("r")
    assert state.turns == [] and ledger.count("lookup") == 1
    async with Journal(journal.path) as fresh:
        model = ScriptedModel(script)
        result = await Agent(model=model, tools=list(make_tools(ledger).values())).resume(
            "r", journal=fresh
        )
    assert result.status is RunStatus.COMPLETED and result.turns == 3
    assert model.calls == 3, "turn 1 was never recorded: it is asked for again"
    assert ledger.count("lookup") == 2 and ledger.count("charge") == 1


async def test_a_cancel_while_a_read_only_call_runs_records_neither_its_turn_nor_its_result(
    journal: Journal,
) -> None:
    @tool(safety=Safety.READ_ONLY)
    async def lookup(context: ToolContext) -> str:
        """Cancelled while it runs."""
        await journal.cancel(context.run_id, reason="stop")
        return "found"

    agent = Agent(model=ScriptedModel(one_call("lookup")), tools=[lookup])
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.CANCELLED and result.turns == 0
    state = await journal.require("r")
    assert state.turns == [] and state.status() == "cancelled"
    assert [r.kind for r in state.records] == ["header", "start", "cancel", "end"]


async def test_nothing_is_recorded_of_a_call_whose_turn_was_refused() -> None:
    """A writer that ignores the lease ends the run while a READ_ONLY call runs: its turn and
    result are refused by the end, and the drive keeps no late result of a call that no recorded
    turn asked for (the journal still folds)."""
    store = MemoryStore()

    @tool(safety=Safety.READ_ONLY)
    async def lookup(context: ToolContext) -> str:
        """Meets a rogue end."""
        await store.append(context.run_id, R.END, R.END, {"status": "failed"})
        return "found"

    async with Journal(store=store) as journal:
        agent = Agent(model=ScriptedModel(one_call("lookup")), tools=[lookup])
        result = await agent.run("r", "go", journal=journal)
        assert result.status is RunStatus.FAILED
        state = await journal.require("r")
    assert [r.kind for r in state.records] == ["header", "start", "end"]


class CancelsAsItAnswers(ScriptedModel):
    """A person cancels the run while the model is answering."""

    def __init__(self, script: list[dict[str, Any]], journal: Journal):
        super().__init__(script)
        self.journal = journal

    async def complete(self, *args: Any) -> Any:
        await self.journal.cancel("r", reason="changed my mind")
        return await super().complete(*args)


async def test_a_cancel_refuses_a_turn_that_waits_at_its_gate(journal: Journal) -> None:
    @tool(safety=Safety.SIDE_EFFECT, approval=single_approval())
    async def charge() -> str:
        """Needs an approval first."""
        return "charged"

    model = CancelsAsItAnswers(one_call("charge"), journal)
    result = await Agent(model=model, tools=[charge]).run("r", "go", journal=journal)
    assert result.status is RunStatus.CANCELLED and result.turns == 0
    state = await journal.require("r")
    assert [r.kind for r in state.records] == ["header", "start", "cancel", "end"]


async def test_a_cancel_that_refuses_the_turn_of_an_idempotent_call_keeps_it_from_running(
    journal: Journal,
) -> None:
    """The turn commits alone before an IDEMPOTENT call runs; a cancel recorded while the model
    answered refuses it, and the call never runs: its key names a call no turn recorded."""
    ledger = Ledger()
    model = CancelsAsItAnswers(one_call("upsert", customer="ann", note="n"), journal)
    result = await Agent(model=model, tools=list(make_tools(ledger).values())).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.CANCELLED and result.turns == 0
    assert ledger.count("upsert") == 0
    state = await journal.require("r")
    assert [r.kind for r in state.records] == ["header", "start", "cancel", "end"]
