"""DurableSDKAgent with real OpenAI Agents SDK code (only the model scripted, by the SDK's own
``agents.testing.ScriptedModel``), on SQLite and PostgreSQL: a lost reply halts the charge and
the CLI resolves and resumes it; a handoff is a durable child run; a Worker drives runs to
completion; approvals; typed output; refusals."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool, handoff
from agents.testing import ModelCall, ScriptedModel, assistant_message, function_call

from adapters.openai_agents import DurableSDKAgent
from runtime import ConfigError, Journal, RunStatus, Safety, Worker
from tests.adapters.openai_agents.sdk_agents import (
    SPEC,
    TRIAGE_SPEC,
    billing,
    triage,
)
from tests.adapters.provider import DROP_REPLY, LEDGER, ledger_lines
from tests.cli.invoke import child


async def test_a_lost_reply_halts_and_the_cli_resolves_and_resumes_it(
    db: str, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK would turn the tool's exception into a message and go on; bide halts instead."""
    monkeypatch.setenv(DROP_REPLY, "1")
    async with Journal(db) as journal:
        result = await billing.run("inv-1", "Charge ann 5.00", journal=journal, spec=SPEC)
        assert result.status is RunStatus.HALTED
        assert [h.call_id for h in result.halts] == ["call_charge"]
        again = await billing.resume("inv-1", journal=journal)
        assert again.status is RunStatus.HALTED
    assert len(ledger_lines()) == 1
    monkeypatch.delenv(DROP_REPLY)
    env = {LEDGER: str(ledger)}
    resolved = child(
        "resolve", "inv-1", "call_charge", "--succeeded", '"charged 500"',
        "--evidence", "provider ledger", "--by", "oncall", "--db", db, **env,
    )  # fmt: skip
    assert resolved.code == 0, resolved.err
    resumed = child("resume", "inv-1", "--db", db, **env)
    assert resumed.code == 0, resumed.err + resumed.out
    assert len(ledger_lines()) == 1
    async with Journal(db) as journal:
        state = await journal.require("inv-1")
        assert state.status() == "completed"
        assert state.end is not None and state.end.payload["output"] == "charged: charged 500"


async def test_a_handoff_is_a_child_run_whose_halt_the_cli_resolves(
    db: str, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """triage hands off to billing: billing runs as a durable child run given the conversation,
    its lost charge reply halts the child, the parent waits on it; the CLI resolves the child's
    call and resumes the parent, which drives the child on; the charge fired once and the
    child's answer is the parent's."""
    monkeypatch.setenv(DROP_REPLY, "1")
    async with Journal(db) as journal:
        result = await triage.run("t-1", "Charge ann 5.00", journal=journal, spec=TRIAGE_SPEC)
        assert result.status is RunStatus.WAITING
        assert await journal.status("t-1/call_hand") == "halted"
        start = await journal.require("t-1/call_hand")
        handed = json.loads(str(start.input))["bide.openai_agents.handoff"]
        assert handed[0] == {"content": "Charge ann 5.00", "role": "user"}
        assert handed[-1]["output"] == '{"assistant": "billing"}'
    assert len(ledger_lines()) == 1
    monkeypatch.delenv(DROP_REPLY)
    env = {LEDGER: str(ledger)}
    resolved = child(
        "resolve", "t-1/call_hand", "call_charge", "--succeeded", '"charged 500"',
        "--by", "oncall", "--db", db, **env,
    )  # fmt: skip
    assert resolved.code == 0, resolved.err
    resumed = child("resume", "t-1", "--db", db, **env)
    assert resumed.code == 0, resumed.err + resumed.out
    assert len(ledger_lines()) == 1
    async with Journal(db) as journal:
        for run in ("t-1", "t-1/call_hand"):
            state = await journal.require(run)
            assert state.status() == "completed"
            assert state.end is not None
            assert state.end.payload["output"] == "charged: charged 500"


async def test_a_worker_drives_submitted_runs_to_completion(db: str, ledger: Path) -> None:
    async with Journal(db) as journal:
        for n in range(2):
            await billing.submit(f"w-{n}", "Charge ann 5.00", journal=journal, spec=SPEC)
        async with Worker(journal, agent=billing, poll=0.05):
            async with asyncio.timeout(60):
                while {await journal.status(f"w-{n}") for n in range(2)} != {"completed"}:
                    await asyncio.sleep(0.05)
    keys = [line.split()[2] for line in ledger_lines()]
    assert len(keys) == 2 and len(set(keys)) == 2


async def test_needs_approval_is_bides_gate(tmp_path: Path) -> None:
    wired: list[int] = []

    @function_tool(needs_approval=True)
    def wire(cents: int) -> str:
        """Wire money."""
        wired.append(cents)
        return "ok"

    model = ScriptedModel(
        [[function_call("wire", {"cents": 900}, call_id="c1")], [assistant_message("wired")]]
    )
    durable = DurableSDKAgent(Agent(name="payer", model=model, tools=[wire]))
    async with Journal(tmp_path / "bide.db") as journal:
        paused = await durable.run("g1", "Wire 9.00", journal=journal)
        assert paused.status is RunStatus.WAITING and wired == []
        await journal.approve("g1", "c1", by="alice")
        done = await durable.resume("g1", journal=journal)
    assert (done.status, done.output, wired) == (RunStatus.COMPLETED, "wired", [900])


@dataclass
class Quote:
    cents: int
    currency: str


async def test_an_output_type_is_bides_typed_output(tmp_path: Path) -> None:
    """The model is asked for the type's schema; an answer that does not fit goes back to it
    once; the valid one is the run's typed output, replayed from the journal."""
    asked: list[Any] = []

    def answer(call: ModelCall) -> Any:
        asked.append(call.output_schema.json_schema() if call.output_schema else None)
        if len(asked) == 1:
            return [assistant_message('{"cents": "lots"}')]
        return [assistant_message('{"cents": 500, "currency": "EUR"}')]

    from agents.testing import ModelStep

    model = ScriptedModel([ModelStep.respond(answer) for _ in range(3)])
    durable = DurableSDKAgent(Agent(name="quoter", model=model, output_type=Quote))
    async with Journal(tmp_path / "bide.db") as journal:
        done = await durable.run("q1", "Quote it", journal=journal)
        again = await durable.run("q1", "Quote it", journal=journal)
    assert done.status is RunStatus.COMPLETED
    assert done.output == Quote(500, "EUR") == again.output
    assert len(asked) == 2 and asked[0]["required"] == ["cents", "currency"]


async def test_a_handoff_gives_the_targets_typed_answer(tmp_path: Path) -> None:
    """With an output_type, the target's validated answer is the parent's output."""
    quoter = Agent(
        name="quoter",
        model=ScriptedModel([[assistant_message('{"cents": 250, "currency": "EUR"}')]]),
        output_type=Quote,
    )
    desk = Agent(
        name="desk",
        model=ScriptedModel([[function_call("transfer_to_quoter", {}, call_id="h")]]),
        handoffs=[quoter],
        output_type=Quote,
    )
    async with Journal(tmp_path / "bide.db") as journal:
        done = await DurableSDKAgent(desk).run("d1", "Quote it", journal=journal)
    assert (done.status, done.output) == (RunStatus.COMPLETED, Quote(250, "EUR"))


def test_what_is_not_supported_is_refused_when_built() -> None:
    model = ScriptedModel([])
    b = Agent(name="b", model=model)
    with pytest.raises(ConfigError, match="on_handoff"):
        DurableSDKAgent(
            Agent(name="a", model=model, handoffs=[handoff(b, on_handoff=lambda ctx: None)])
        )
    with pytest.raises(ConfigError, match="input_filter"):
        flt = handoff(b, input_filter=lambda data: data)
        DurableSDKAgent(Agent(name="a", model=model, handoffs=[flt]))
    with pytest.raises(ConfigError, match="output_type differs"):
        DurableSDKAgent(Agent(name="a", model=model, handoffs=[b], output_type=int))
    loop = Agent(name="c", model=model)
    loop.handoffs = [Agent(name="d", model=model, handoffs=[loop])]
    with pytest.raises(ConfigError, match="handoff cycle"):
        DurableSDKAgent(loop)
    with pytest.raises(ConfigError, match="computed by a function"):
        DurableSDKAgent(Agent(name="a", model=model, instructions=lambda ctx, agent: "hi"))
    with pytest.raises(ConfigError, match="do not have"):
        DurableSDKAgent(Agent(name="a", model=model), tools={"x": Safety.READ_ONLY})
