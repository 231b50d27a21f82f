"""A Pydantic AI agent run by bide on SQLite and PostgreSQL: a halt resolved from the CLI, and
runs driven to completion by a Worker. Real Pydantic AI code; only the model is scripted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime import Journal, RunStatus, Worker
from tests.adapters.provider import DROP_REPLY, LEDGER, ledger_lines
from tests.adapters.pydantic_ai import agents
from tests.adapters.pydantic_ai.agents import SPEC, billing
from tests.cli.invoke import child


async def test_a_lost_reply_halts_and_the_cli_resolves_and_resumes_it(
    db: str, ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DROP_REPLY, "1")
    async with Journal(db) as journal:
        result = await billing.run("inv-1", "Charge ann 5.00", journal=journal, spec=SPEC)
        assert result.status is RunStatus.HALTED
        assert [h.call_id for h in result.halts] == ["call_charge"]
        # Driving it again does not charge again: it halts on the same call.
        again = await billing.resume("inv-1", journal=journal)
        assert again.status is RunStatus.HALTED
    assert len(ledger_lines()) == 1
    key = ledger_lines()[0].split()[2]
    monkeypatch.delenv(DROP_REPLY)

    listed = child("list", "--db", db, "--json", **{LEDGER: str(ledger)})
    assert listed.code == 0, listed.err
    (row,) = [r for r in listed.json()["runs"] if r["run_id"] == "inv-1"]
    assert row["status"] == "halted"
    resolved = child(
        "resolve", "inv-1", "call_charge", "--succeeded", f'{{"charged": 500, "key": "{key}"}}',
        "--evidence", "provider ledger", "--by", "oncall", "--db", db,
        **{LEDGER: str(ledger)},
    )  # fmt: skip
    assert resolved.code == 0, resolved.err
    resumed = child("resume", "inv-1", "--db", db, **{LEDGER: str(ledger)})
    assert resumed.code == 0, resumed.err + resumed.out
    shown = child("show", "inv-1", "--db", db, "--json", **{LEDGER: str(ledger)})
    assert shown.code == 0, shown.err
    assert shown.json()["status"] == "completed"
    assert len(ledger_lines()) == 1
    async with Journal(db) as journal:
        state = await journal.require("inv-1")
        assert state.status() == "completed"
        assert state.end is not None
        assert state.end.payload["output"] == f"charged: {{'charged': 500, 'key': '{key}'}}"


async def test_a_worker_drives_submitted_runs_to_completion(db: str, ledger: Path) -> None:
    async with Journal(db) as journal:
        for n in range(3):
            submitted = await billing.submit(
                f"w-{n}", "Charge ann 5.00", journal=journal, spec=SPEC
            )
            assert submitted.status.value == "submitted"
        assert ledger_lines() == []
        async with Worker(journal, agent=billing, poll=0.05):
            async with asyncio.timeout(60):
                while {await journal.status(f"w-{n}") for n in range(3)} != {"completed"}:
                    await asyncio.sleep(0.05)
        for n in range(3):
            state = await journal.require(f"w-{n}")
            assert state.end is not None
            assert str(state.end.payload["output"]).startswith("charged: {'charged': 500")
    keys = [line.split()[2] for line in ledger_lines()]
    assert len(keys) == 3 and len(set(keys)) == 3


def test_the_agents_module_is_what_the_cli_rebuilds() -> None:
    """The spec the runs journal names this very agent (a typo would fail the CLI tests)."""
    module, _, attr = SPEC.partition(":")
    assert module == agents.__name__ and getattr(agents, attr) is billing
