"""Runs as a whole: memoised turns, inputs, budgets, cancel, protocol checks, model failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from runtime import (
    Agent,
    AssistantTurn,
    BudgetError,
    ConfigError,
    Journal,
    Message,
    ModelError,
    ProtocolError,
    RetryPolicy,
    RunBusy,
    RunResult,
    RunStatus,
    Safety,
    StorageError,
    ToolCall,
    ToolSpec,
    tool,
)
from runtime.loop import RunDrive
from runtime.testing import ScriptedModel
from tests.helpers import Ledger, call, inject, make_tools, slow

SCRIPT = [
    {"tool_calls": [call("c1", "lookup", customer="ann")]},
    {"tool_calls": [call("c2", "charge", customer="ann", amount=5)]},
    {"text": "done"},
]


def agent(ledger: Ledger, script: Any = SCRIPT, **kw: Any) -> Agent:
    return Agent(model=ScriptedModel(script), tools=list(make_tools(ledger).values()), **kw)


async def test_a_finished_run_returns_its_recorded_result_without_model_or_tools(
    journal: Journal,
) -> None:
    ledger = Ledger()
    first = await agent(ledger).run("r", "go", journal=journal)
    model = ScriptedModel([])
    again = await Agent(model=model, tools=list(make_tools(ledger).values())).run(
        "r", "go", journal=journal
    )
    assert again == first
    assert model.calls == 0 and ledger.count("charge") == 1


async def test_a_different_input_for_an_existing_run_is_a_config_error(journal: Journal) -> None:
    await agent(Ledger()).run("r", "go", journal=journal)
    with pytest.raises(ConfigError, match="different input"):
        await agent(Ledger()).run("r", "something else", journal=journal)


async def test_resuming_a_run_that_does_not_exist_is_a_config_error(journal: Journal) -> None:
    with pytest.raises(ConfigError, match="no run"):
        await agent(Ledger()).resume("ghost", journal=journal)
    assert (await journal.list_runs()).runs == []


class StopsAtTheAnswer(ScriptedModel):
    """Tells its drive to stop (as a worker told to stop does) once it gave the final answer."""

    def __init__(self, script: Any, stop: asyncio.Event):
        super().__init__(script)
        self.stop = stop

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        turn = await super().complete(system_prompt, messages, tools)
        if not turn.tool_calls:
            self.stop.set()
        return turn


async def test_a_final_answer_recorded_without_its_end_finishes_on_resume_with_no_model_call(
    journal: Journal,
) -> None:
    """The answer commits with the end, or alone when the drive stops between the two: then
    the next drive ends the run with it and asks the model nothing."""
    ledger = Ledger()
    stop = asyncio.Event()
    answering = Agent(model=StopsAtTheAnswer(SCRIPT, stop), tools=list(make_tools(ledger).values()))
    stopped = await RunDrive(answering, journal, "r", yielding=stop).go("go", None)
    assert stopped.status is RunStatus.RUNNING
    state = await journal.require("r")
    assert state.end is None and state.turns[-1].text == "done"
    model = ScriptedModel(SCRIPT)
    result = await Agent(model=model, tools=list(make_tools(ledger).values())).resume(
        "r", journal=journal
    )
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    assert model.calls == 0


async def test_recorded_turns_are_never_requested_again_after_a_crash(journal: Journal) -> None:
    ledger = Ledger()
    # Writes: create, start, turn 1 with the lookup's result, turn 2 with the charge's marker,
    # the charge's result. Fail that one: turns 1 and 2 are recorded, the charge halts.
    inject(journal, 5, after_commit=False)
    with pytest.raises(StorageError):
        await agent(ledger).run("r", "go", journal=journal)
    async with Journal(journal.path) as fresh:
        model = ScriptedModel(SCRIPT)
        result = await Agent(model=model, tools=list(make_tools(ledger).values())).resume(
            "r", journal=fresh
        )
    assert result.status is RunStatus.HALTED
    assert model.calls == 0


async def test_max_turns_is_a_budget_error_journaled_as_a_stop_and_the_run_continues_once_raised(
    journal: Journal,
) -> None:
    ledger = Ledger()
    with pytest.raises(BudgetError, match=r"max_turns=2$"):
        await agent(ledger, max_turns=2).run("r", "go", journal=journal)
    state = await journal.require("r")
    assert state.status() == "orphaned", "nobody drives it: no view may say running"
    assert state.stop is not None and state.stop.payload["reason"] == "max_turns"
    assert state.stop.payload["remedy"] == "raise max_turns in the agent, then resume"
    row = await journal.run_row("r")
    assert row is not None and row.status == "orphaned"
    with pytest.raises(BudgetError):  # the same stop again adds no record
        await agent(ledger, max_turns=2).resume("r", journal=journal)
    assert len((await journal.require("r")).stops) == 1
    result = await agent(ledger, max_turns=3).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert (await journal.require("r")).status() == "completed"
    assert ledger.count("charge") == 1


async def test_a_cancel_request_is_honoured_at_the_next_turn_boundary(journal: Journal) -> None:
    ledger = Ledger()
    # Fail write 4 (turn 2 with the charge's marker): stop right after turn 1's result.
    inject(journal, 4, after_commit=False)
    with pytest.raises(StorageError):
        await agent(ledger).run("r", "go", journal=journal)
    async with Journal(journal.path) as fresh:
        assert await fresh.cancel("r", reason="customer left", by="ops")
        assert not await fresh.cancel("r")
        model = ScriptedModel(SCRIPT)
        result = await Agent(model=model, tools=list(make_tools(ledger).values())).resume(
            "r", journal=fresh
        )
        assert result.status is RunStatus.CANCELLED
        assert model.calls == 0 and ledger.count("charge") == 0
        with pytest.raises(ConfigError, match="already ended"):
            await fresh.cancel("r")


async def test_a_cancel_during_a_turn_stops_attempts_that_have_not_started(
    journal: Journal,
) -> None:
    ledger = Ledger()

    @tool(safety=Safety.READ_ONLY)
    async def lookup(customer: str) -> str:
        await journal.cancel("r", reason="stop")
        await asyncio.sleep(0.01)
        return "found"

    tools = make_tools(ledger)
    tools["lookup"] = lookup
    script = [
        {"tool_calls": [call("c1", "lookup", customer="a")]},
        {"tool_calls": [call("c2", "charge", customer="a", amount=1)]},
        {"text": "done"},
    ]
    result = await Agent(model=ScriptedModel(script), tools=list(tools.values())).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.CANCELLED
    assert ledger.count("charge") == 0
    row = await journal.run_row("r")
    assert row is not None and row.status == "cancelled"


class BadModel:
    def __init__(self, turns: Sequence[AssistantTurn]):
        self.turns = list(turns)

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        return self.turns[sum(isinstance(m, AssistantTurn) for m in messages)]


@pytest.mark.parametrize(
    ("calls", "match"),
    [
        ([ToolCall("", "lookup", {})], "without a usable id"),
        ([ToolCall("x", "lookup", {}), ToolCall("x", "lookup", {})], "twice"),
    ],
)
async def test_a_turn_with_missing_or_duplicate_call_ids_is_a_protocol_error_not_journaled(
    journal: Journal, calls: list[ToolCall], match: str
) -> None:
    ledger = Ledger()
    a = Agent(
        model=BadModel([AssistantTurn(tool_calls=tuple(calls))]),
        tools=list(make_tools(ledger).values()),
    )
    with pytest.raises(ProtocolError, match=match):
        await a.run("r", "go", journal=journal)
    state = await journal.require("r")
    assert state.turns == [] and ledger.executions == []


async def test_a_call_id_reused_from_an_earlier_turn_is_a_protocol_error(journal: Journal) -> None:
    ledger = Ledger()
    turn = AssistantTurn(tool_calls=(ToolCall("c1", "lookup", {"customer": "a"}),))
    a = Agent(model=BadModel([turn, turn]), tools=list(make_tools(ledger).values()))
    with pytest.raises(ProtocolError, match="reused"):
        await a.run("r", "go", journal=journal)
    assert len((await journal.require("r")).turns) == 1


class FailingModel:
    def __init__(self, errors: list[ModelError], then: AssistantTurn):
        self.errors = errors
        self.then = then
        self.calls = 0

    async def complete(self, *args: Any) -> AssistantTurn:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.then


async def test_a_retryable_model_error_is_retried_honouring_retry_after(journal: Journal) -> None:
    model = FailingModel(
        [ModelError("429", retryable=True, retry_after=0.01), ModelError("503", retryable=True)],
        AssistantTurn(text="hi"),
    )
    a = Agent(model=model, model_retry=RetryPolicy(max_attempts=3, initial_delay=0.001))
    result = await a.run("r", "go", journal=journal)
    assert result.status is RunStatus.COMPLETED and model.calls == 3


async def test_retryable_model_errors_past_the_policy_leave_the_run_resumable(
    journal: Journal,
) -> None:
    model = FailingModel([ModelError("503", retryable=True)] * 2, AssistantTurn(text="hi"))
    a = Agent(model=model, model_retry=RetryPolicy(max_attempts=2, initial_delay=0))
    with pytest.raises(ModelError):
        await a.run("r", "go", journal=journal)
    state = await journal.require("r")
    assert state.status() == "orphaned"
    assert state.stop is not None and state.stop.payload["reason"] == "model_unavailable"
    assert "503" in state.stop.payload["message"]
    assert (await a.resume("r", journal=journal)).status is RunStatus.COMPLETED


async def test_a_non_retryable_model_error_fails_the_run(journal: Journal) -> None:
    model = FailingModel([ModelError("400 bad request", status_code=400)], AssistantTurn())
    result = await Agent(model=model).run("r", "go", journal=journal)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and "400 bad request" in result.error
    assert model.calls == 1
    row = await journal.run_row("r")
    assert row is not None and row.status == "failed"


async def test_one_agent_drives_many_runs_at_once(journal: Journal) -> None:
    ledger = Ledger()
    a = agent(ledger)
    results = await asyncio.gather(*(a.run(f"r{i}", "go", journal=journal) for i in range(30)))
    assert {r.status for r in results} == {RunStatus.COMPLETED}
    assert ledger.count("charge") == 30
    assert len(set(ledger.keys("charge"))) == 30


async def test_two_drivers_of_one_run_one_drives_and_the_other_is_refused(db_path: Any) -> None:
    ledger = Ledger()
    tools = make_tools(ledger)
    tools["charge"] = slow(ledger, "charge", Safety.SIDE_EFFECT, 0.05)
    script = [{"tool_calls": [call("c1", "charge")]}, {"text": "done"}]
    async with Journal(db_path) as j1, Journal(db_path) as j2:
        a1 = Agent(model=ScriptedModel(script), tools=list(tools.values()))
        a2 = Agent(model=ScriptedModel(script), tools=list(tools.values()))
        results = await asyncio.gather(
            a1.run("r", "go", journal=j1), a2.run("r", "go", journal=j2), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, RunBusy)]
        finished = [r for r in results if isinstance(r, RunResult)]
        assert len(refused) == 1 and len(finished) == 1
        assert finished[0].status is RunStatus.COMPLETED
        assert "is being driven by process" in str(refused[0])
        # Once the first drive released the lease, a resume drives (and replays) it.
        again = await a2.resume("r", journal=j2)
    assert again.status is RunStatus.COMPLETED
    assert ledger.count("charge") == 1


async def test_run_status_and_index_follow_the_drive(journal: Journal) -> None:
    ledger = Ledger()
    await agent(ledger).run("r", "go", journal=journal)
    row = await journal.run_row("r")
    assert row is not None
    assert (row.status, row.turns, row.agent) == ("completed", 3, "agent")
    assert (await journal.require("r")).status() == "completed"


def test_two_tools_with_one_name_are_a_config_error() -> None:
    ledger = Ledger()
    tools = make_tools(ledger)
    with pytest.raises(ConfigError, match="named 'lookup'"):
        Agent(model=ScriptedModel([]), tools=[tools["lookup"], tools["lookup"]])


@pytest.mark.parametrize("kw", [{"max_turns": 0}, {"max_concurrency": 0}, {"max_turns": True}])
def test_agent_limits_are_validated(kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Agent(model=ScriptedModel([]), **kw)
