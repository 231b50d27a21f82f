"""DurableSDKAgent with real OpenAI Agents SDK code (only the model scripted, by the SDK's own
``agents.testing.ScriptedModel``), on SQLite and PostgreSQL: a lost reply halts the charge and
the CLI resolves and resumes it; a Worker drives runs to completion; approvals; refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Agent, function_tool, handoff
from agents.testing import ScriptedModel, assistant_message, function_call

from adapters.openai_agents import DurableSDKAgent
from runtime import ConfigError, Journal, RunStatus, Safety, Worker
from tests.adapters.openai_agents.sdk_agents import SPEC, billing, ledger_lines
from tests.cli.invoke import child


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "bide.db")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("BIDE_SDK_LEDGER", str(path))
    yield path


async def test_a_lost_reply_halts_and_the_cli_resolves_and_resumes_it(
    db: str, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK would turn the tool's exception into a message and go on; bide halts instead."""
    monkeypatch.setenv("BIDE_SDK_DROP_REPLY", "1")
    async with Journal(db) as journal:
        result = await billing.run("inv-1", "Charge ann 5.00", journal=journal, spec=SPEC)
        assert result.status is RunStatus.HALTED
        assert [h.call_id for h in result.halts] == ["call_charge"]
        again = await billing.resume("inv-1", journal=journal)
        assert again.status is RunStatus.HALTED
    assert len(ledger_lines()) == 1
    monkeypatch.delenv("BIDE_SDK_DROP_REPLY")
    env = {"BIDE_SDK_LEDGER": str(ledger)}
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


def test_what_is_not_supported_yet_is_refused_when_built() -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigError, match="handoffs"):
        DurableSDKAgent(Agent(name="a", model=model, handoffs=[handoff(Agent(name="b"))]))
    with pytest.raises(ConfigError, match="structured output_type"):
        DurableSDKAgent(Agent(name="a", model=model, output_type=int))
    with pytest.raises(ConfigError, match="computed by a function"):
        DurableSDKAgent(Agent(name="a", model=model, instructions=lambda ctx, agent: "hi"))
    with pytest.raises(ConfigError, match="does not have"):
        DurableSDKAgent(Agent(name="a", model=model), tools={"x": Safety.READ_ONLY})
