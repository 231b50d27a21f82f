"""The resume matrix of docs/guarantee.md, row by row, per Safety class."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import Agent, Journal, Resolution, RunStatus, Safety, ToolContext, tool
from runtime import records as R
from runtime.testing import ScriptedModel
from tests.helpers import Ledger, call, make_tools

SCRIPT = [
    {"tool_calls": [call("c1", "lookup", customer="ann")]},
    {"tool_calls": [call("c2", "upsert", customer="ann", note="vip")]},
    {"tool_calls": [call("c3", "charge", customer="ann", amount=30)]},
    {"text": "charged ann 30"},
]


def agent_for(ledger: Ledger, script: list[dict[str, Any]] = SCRIPT, **kw: Any) -> Agent:
    tools = make_tools(ledger)
    return Agent(model=ScriptedModel(script), tools=list(tools.values()), **kw)


async def test_a_clean_run_executes_each_call_once_and_completes(journal: Journal) -> None:
    ledger = Ledger()
    result = await agent_for(ledger).run("r", "charge ann", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert result.output == "charged ann 30"
    assert result.turns == 4
    assert [n for n, _, _ in ledger.executions] == ["lookup", "upsert", "charge"]


@pytest.mark.parametrize("tool_name", ["lookup", "upsert", "charge"])
async def test_a_recorded_result_is_replayed_and_never_called_again(
    journal: Journal, tool_name: str
) -> None:
    ledger = Ledger()
    await agent_for(ledger).run("r", "x", journal=journal)
    model = ScriptedModel(SCRIPT)
    again = Agent(model=model, tools=list(make_tools(ledger).values()))
    result = await again.run("r", "x", journal=journal)
    assert result.status is RunStatus.COMPLETED and result.output == "charged ann 30"
    assert ledger.count(tool_name) == 1
    assert model.calls == 0


async def test_a_recorded_error_is_replayed_to_the_model_and_never_retried(
    journal: Journal,
) -> None:
    attempts = []

    @tool
    async def refund(amount: int) -> None:
        attempts.append(amount)
        raise_tool_error()

    script = [{"tool_calls": [call("c1", "refund", amount=5)]}, {"text": "could not refund"}]
    model = ScriptedModel(script)
    result = await Agent(model=model, tools=[refund]).run("r", "x", journal=journal)
    assert result.status is RunStatus.COMPLETED
    state = await journal.require("r")
    assert state.calls["c1"].message_content() == (
        {"type": "ToolError", "message": "card declined"},
        True,
    )
    await Agent(model=ScriptedModel(script), tools=[refund]).run("r", "x", journal=journal)
    assert attempts == [5]


def raise_tool_error() -> None:
    from runtime import ToolError

    raise ToolError("card declined")


async def test_a_side_effect_marker_is_committed_before_the_call_leaves(
    journal: Journal, db_path: Any
) -> None:
    seen: list[Any] = []

    @tool
    async def charge(amount: int, context: ToolContext) -> dict[str, int]:
        # Read the journal from another connection while the effect is "happening".
        async with Journal(db_path) as other:
            seen.append(await other.store.get(context.run_id, R.attempt_key(context.call_id, 1)))
        return {"charged": amount}

    script = [{"tool_calls": [call("c1", "charge", amount=1)]}, {"text": "ok"}]
    await Agent(model=ScriptedModel(script), tools=[charge]).run("r", "x", journal=journal)
    assert seen[0] is not None and seen[0].kind == "attempt"
    assert seen[0].payload["safety"] == "side_effect"


async def test_retry_safe_calls_write_no_marker(journal: Journal) -> None:
    ledger = Ledger()
    await agent_for(ledger).run("r", "x", journal=journal)
    state = await journal.require("r")
    kinds = {(r.kind, r.payload.get("call_id")) for r in state.records}
    assert ("attempt", "c1") not in kinds and ("attempt", "c2") not in kinds
    assert ("attempt", "c3") in kinds


async def halt_at_charge(journal: Journal, ledger: Ledger) -> None:
    """Leave the run with a side effect attempted and no result: a crash after the marker."""
    from runtime.errors import ToolOutcomeUnknown

    @tool(name="charge")
    async def lost(customer: str, amount: int, context: ToolContext) -> dict[str, Any]:
        ledger.executions.append(("charge", {"amount": amount}, context.idempotency_key))
        raise ToolOutcomeUnknown("connection reset after the request was sent")

    tools = make_tools(ledger)
    tools["charge"] = lost
    result = await Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values())).run(
        "r", "x", journal=journal
    )
    assert result.status is RunStatus.HALTED
    assert result.halt is not None and result.halt.call_id == "c3"
    assert result.halt.tool == "charge"
    assert result.halt.arguments == {"customer": "ann", "amount": 30}
    assert result.halt.attempted_at_ms is not None


async def test_an_attempt_without_result_halts_and_every_resume_halts_again(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    before = len((await journal.require("r")).records)
    for _ in range(3):
        model = ScriptedModel(SCRIPT)
        agent = Agent(model=model, tools=list(make_tools(ledger).values()))
        result = await agent.resume("r", journal=journal)
        assert result.status is RunStatus.HALTED and result.halt is not None
        assert result.halt.call_id == "c3"
        assert model.calls == 0
    assert ledger.count("charge") == 1
    assert len((await journal.require("r")).records) == before, "a halted resume wrote records"


@pytest.mark.parametrize("relabel", [Safety.READ_ONLY, Safety.IDEMPOTENT, None])
async def test_a_relabelled_or_removed_tool_still_halts_on_its_old_marker(
    journal: Journal, relabel: Safety | None
) -> None:
    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    tools = make_tools(ledger)
    if relabel is None:
        del tools["charge"]
    else:

        @tool(name="charge", safety=relabel)
        async def relabelled(customer: str, amount: int) -> dict[str, Any]:
            ledger.executions.append(("charge", {}, None))
            return {}

        tools["charge"] = relabelled
    result = await Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values())).resume(
        "r", journal=journal
    )
    assert result.status is RunStatus.HALTED
    assert ledger.count("charge") == 1


async def test_a_not_executed_resolution_allows_a_new_attempt_with_a_new_marker(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    assert await journal.resolve("r", "c3", Resolution.not_executed(), by="ops")
    result = await agent_for(ledger).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert ledger.count("charge") == 2  # the first attempt provably never acted
    state = await journal.require("r")
    assert sorted(state.calls["c3"].markers) == [1, 2]
    assert state.calls["c3"].result is not None
    assert state.calls["c3"].result.payload["attempt"] == 2


async def test_a_succeeded_resolution_is_what_the_model_sees(journal: Journal) -> None:
    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    assert await journal.resolve(
        "r",
        "c3",
        Resolution.succeeded({"charged": 30, "ref": "ch_1"}),
        by="ops",
        evidence="ledger row 7",
    )
    state = await journal.require("r")
    assert state.calls["c3"].message_content() == ({"charged": 30, "ref": "ch_1"}, False)
    resolved = state.calls["c3"].result
    assert resolved is not None
    assert resolved.payload["resolved"] == {"by": "ops", "evidence": "ledger row 7"}
    result = await agent_for(ledger).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert ledger.count("charge") == 1


async def test_a_failed_resolution_reaches_the_model_as_an_error(journal: Journal) -> None:
    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    await journal.resolve("r", "c3", Resolution.failed("bank says no such charge"))
    state = await journal.require("r")
    content, is_error = state.calls["c3"].message_content()
    assert is_error and content["message"] == "bank says no such charge"
    assert (await agent_for(ledger).resume("r", journal=journal)).status is RunStatus.COMPLETED
    assert ledger.count("charge") == 1


async def test_the_first_resolution_wins_the_same_again_is_a_no_op_a_different_one_is_refused(
    journal: Journal,
) -> None:
    from runtime.errors import ConfigError, ConflictError

    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    assert await journal.resolve("r", "c3", Resolution.succeeded({"charged": 30}))
    assert not await journal.resolve("r", "c3", Resolution.succeeded({"charged": 30}))
    with pytest.raises(ConflictError):
        await journal.resolve("r", "c3", Resolution.not_executed())
    with pytest.raises(ConflictError):
        await journal.resolve("r", "c3", Resolution.succeeded({"charged": 31}))
    with pytest.raises(ConfigError, match=r"not halted|has a result"):
        await journal.resolve("r", "c1", Resolution.not_executed())
    with pytest.raises(ConfigError, match="no call"):
        await journal.resolve("r", "nope", Resolution.not_executed())
    with pytest.raises(ConfigError, match="no run"):
        await journal.resolve("ghost", "c3", Resolution.not_executed())


async def test_not_executed_twice_is_a_no_op_and_then_a_different_resolution_is_refused(
    journal: Journal,
) -> None:
    from runtime.errors import ConflictError

    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    assert await journal.resolve("r", "c3", Resolution.not_executed())
    assert not await journal.resolve("r", "c3", Resolution.not_executed())
    assert not await journal.resolve("r", "c3", Resolution.not_executed(), attempt=1)
    with pytest.raises(ConflictError):
        await journal.resolve("r", "c3", Resolution.failed("no"))
    with pytest.raises(ConflictError):
        await journal.resolve("r", "c3", Resolution.failed("no"), attempt=1)


async def test_an_unknown_tool_name_is_an_error_result_and_nothing_runs(journal: Journal) -> None:
    ledger = Ledger()
    script = [{"tool_calls": [call("c1", "teleport", to="mars")]}, {"text": "cannot"}]
    result = await agent_for(ledger, script).run("r", "x", journal=journal)
    assert result.status is RunStatus.COMPLETED
    state = await journal.require("r")
    content, is_error = state.calls["c1"].message_content()
    assert is_error and content["type"] == "unknown_tool"
    assert ledger.executions == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"customer": "ann", "amount": "30"},  # a string is not an integer (strict)
        {"customer": "ann"},  # missing
        {"customer": "ann", "amount": 30, "extra": 1},  # not in the schema
        ["ann", 30],  # not an object
    ],
)
async def test_arguments_failing_the_schema_are_an_error_result_and_the_tool_never_runs(
    journal: Journal, arguments: Any
) -> None:
    ledger = Ledger()
    script = [
        {"tool_calls": [{"id": "c1", "name": "charge", "arguments": arguments}]},
        {"text": "sorry"},
    ]
    result = await agent_for(ledger, script).run("r", "x", journal=journal)
    assert result.status is RunStatus.COMPLETED
    state = await journal.require("r")
    content, is_error = state.calls["c1"].message_content()
    assert is_error and content["type"] == "invalid_arguments"
    assert ledger.executions == []
    assert state.calls["c1"].markers == {}, "a call refused before sending writes no marker"


async def test_a_resolution_is_bound_to_the_attempt_it_judged(journal: Journal) -> None:
    """Not executed said again once attempt 2 was sent and halted is not attempt 2's
    resolution: unnamed it is refused as ambiguous, naming attempt 1 it is refused as stale,
    and the next resume sends nothing. Naming attempt 2 resolves attempt 2."""
    from runtime.errors import ConfigError, ConflictError

    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    assert await journal.resolve("r", "c3", Resolution.not_executed())
    await halt_at_charge_again(journal, ledger)
    assert ledger.count("charge") == 2
    with pytest.raises(ConflictError, match=r"has had 2 attempts and is on attempt 2: name"):
        await journal.resolve("r", "c3", Resolution.not_executed())
    with pytest.raises(ConflictError, match=r"is on attempt 2 now \(which has no result\)"):
        await journal.resolve("r", "c3", Resolution.not_executed(), attempt=1)
    with pytest.raises(ConflictError, match=r"a different resolution is refused"):
        await journal.resolve("r", "c3", Resolution.succeeded({"charged": 30}), attempt=1)
    with pytest.raises(ConfigError, match=r"has no attempt 3: it is on attempt 2"):
        await journal.resolve("r", "c3", Resolution.not_executed(), attempt=3)
    state = await journal.require("r")
    assert (state.calls["c3"].attempt, sorted(state.calls["c3"].results)) == (2, [1])
    await halt_at_charge_again(journal, ledger)
    assert ledger.count("charge") == 2, "a refused resolution let the charge be sent again"

    assert await journal.resolve("r", "c3", Resolution.failed("declined"), attempt=2)
    assert not await journal.resolve("r", "c3", Resolution.failed("declined"), attempt=2)
    resolved = (await journal.require("r")).calls["c3"].result
    assert resolved is not None and resolved.key == "result/c3/2"
    assert resolved.payload["attempt"] == 2


async def halt_at_charge_again(journal: Journal, ledger: Ledger) -> None:
    """Resume the run of ``halt_at_charge``: a new attempt, if one is due, is lost again."""
    from runtime.errors import ToolOutcomeUnknown

    @tool(name="charge")
    async def lost(customer: str, amount: int, context: ToolContext) -> dict[str, Any]:
        ledger.executions.append(("charge", {"amount": amount}, context.idempotency_key))
        raise ToolOutcomeUnknown("connection reset after the request was sent")

    tools = make_tools(ledger)
    tools["charge"] = lost
    agent = Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values()))
    assert (await agent.resume("r", journal=journal)).status is RunStatus.HALTED


async def test_a_resolution_overtaken_before_it_commits_is_refused_naming_the_new_attempt(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between a resolver's read (attempt 1 halted) and its append, another resolves attempt 1
    "not executed" and a drive sends attempt 2: the first resolver's record never lands, and
    it is told the call moved on to attempt 2."""
    from runtime.errors import ConflictError

    ledger = Ledger()
    await halt_at_charge(journal, ledger)
    store, append = journal.store, journal.store.append
    overtaken: list[str] = []

    async def overtaking(run_id: str, key: str, *args: Any, **kw: Any) -> Any:
        if key == R.result_key("c3", 1) and not overtaken:
            overtaken.append(key)
            assert await journal.resolve("r", "c3", Resolution.not_executed(), by="first")
            await halt_at_charge_again(journal, ledger)
        return await append(run_id, key, *args, **kw)

    monkeypatch.setattr(store, "append", overtaking)
    with pytest.raises(ConflictError, match=r"is on attempt 2 now"):
        await journal.resolve("r", "c3", Resolution.not_executed(), by="second")
    assert overtaken and ledger.count("charge") == 2
    state = await journal.require("r")
    assert state.calls["c3"].results[1].payload["resolved"]["by"] == "first"
    assert 2 not in state.calls["c3"].results


async def test_the_store_refuses_a_resolution_of_an_attempt_once_the_next_is_marked(
    journal: Journal,
) -> None:
    """The resolution of attempt k is guarded, in its own transaction, by attempt k + 1's
    marker: even in a journal whose attempt 2 was marked without attempt 1's result, a
    resolution of attempt 1 never lands."""
    from runtime.errors import ConflictError

    await halt_at_charge(journal, Ledger())
    marker = {"call_id": "c3", "attempt": 2, "tool": "charge", "safety": "side_effect"}
    await journal.store.append("r", R.attempt_key("c3", 2), R.ATTEMPT, marker)
    with pytest.raises(ConflictError, match=r"attempt 2 was marked though attempt 1 has no"):
        await journal.resolve("r", "c3", Resolution.not_executed(), attempt=1)
    assert await journal.store.get("r", R.result_key("c3", 1)) is None
