"""Nothing is appended to a run after its end; a journal that shows otherwise is flagged."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    ConflictError,
    Journal,
    Resolution,
    RunBusy,
    RunStatus,
    single_approval,
    tool,
)
from runtime.testing import ScriptedModel
from tests.cli.invoke import Cli
from tests.helpers import call


async def test_an_in_flight_call_is_not_resolved_and_a_forced_resolution_keeps_the_truth(
    db_path: Path,
) -> None:
    """While the drive that attempted a side effect holds a live lease, the call is in flight:
    a resolution is refused, naming the process. A forced one is journaled as forced; the live
    drive's result, when it comes, is kept as evidence beside it, and nothing ran twice."""
    started = asyncio.Event()
    charges: list[int] = []

    @tool
    async def charge(amount: int) -> dict[str, int]:
        """A slow charge."""
        charges.append(amount)
        started.set()
        await asyncio.sleep(0.5)
        return {"charged": amount}

    script = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]
    async with Journal(db_path) as j1, Journal(db_path) as j2:
        first = asyncio.create_task(
            Agent(model=ScriptedModel(script), tools=[charge]).run("r", "go", journal=j1)
        )
        await started.wait()
        assert await j2.status("r") == "running"
        with pytest.raises(RunBusy, match=r"call c1 \(charge\) of run r is still running in"):
            await j2.resolve("r", "c1", Resolution.not_executed(), by="ops")
        assert await j2.resolve("r", "c1", Resolution.not_executed(), by="ops", force=True)
        with pytest.raises(RunBusy, match="is being driven by"):
            await Agent(model=ScriptedModel(script), tools=[charge]).resume("r", journal=j2)
        done = await first  # its late result is kept beside the forced resolution
        assert done.status is RunStatus.COMPLETED
        state = await j2.require("r")
    assert charges == [5]
    resolved = state.calls["c1"].results[1].payload["resolved"]
    assert resolved["by"] == "ops" and resolved["forced"]["lease_epoch"] == 1
    assert state.calls["c1"].late[1].payload["value"] == {"charged": 5}
    assert state.anomalies() == []


def test_records_after_the_end_written_by_an_older_bide_are_flagged(
    db_path: Path, cli: Cli
) -> None:
    async def runs() -> None:
        async with Journal(db_path) as journal:
            for run_id in ("r", "ok"):
                await Agent(model=ScriptedModel([{"text": "done"}])).run(
                    run_id, "go", journal=journal
                )

    asyncio.run(runs())
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute(
            "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
            "VALUES ('r', 'turn/2', 'turn', 'json', ?, 0)",
            ('{"n": 2, "turn": {"text": "again", "tool_calls": []}, "plan": {}}',),
        )
    conn.close()
    done = cli("verify", "--db", str(db_path))
    assert done.code == 1
    assert done.out.splitlines() == [
        "run r records after the end: turn/2 (seq 9)",
        "2 runs checked, 1 with findings",
    ]
    assert cli("verify", "ok", "--db", str(db_path)).code == 0


def test_verify_reports_a_run_it_cannot_read_and_checks_the_others(db_path: Path, cli: Cli) -> None:
    async def runs() -> None:
        async with Journal(db_path) as journal:
            for run_id in ("a", "broken", "z"):
                await Agent(model=ScriptedModel([{"text": "done"}])).run(
                    run_id, "go", journal=journal
                )

    asyncio.run(runs())
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute(
            "UPDATE bide_records SET payload = '{oops' WHERE run_id = 'broken' AND key = 'turn/1'"
        )
        conn.execute(
            "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
            "VALUES ('z', 'turn/2', 'turn', 'json', ?, 0)",
            ('{"n": 2, "turn": {"text": "again", "tool_calls": []}, "plan": {}}',),
        )
    conn.close()
    done = cli("verify", "--db", str(db_path))
    assert done.code == 1, done.err
    lines = done.out.splitlines()
    assert lines[-1] == "3 runs checked, 2 with findings"
    assert any(line.startswith("run z records after the end: turn/2 (seq ") for line in lines)
    (broken,) = [line for line in lines if line.startswith("run broken ")]
    assert broken.startswith("run broken cannot be read: record 'turn/1' of run 'broken'")
    listed = cli("verify", "nobody", "a", "--db", str(db_path), "--json")
    assert listed.code == 1 and listed.json()["checked"] == 2
    assert list(listed.json()["findings"]) == ["nobody"]


async def test_a_decision_or_an_answer_after_the_end_is_refused(journal: Journal) -> None:
    @tool(approval=single_approval())
    async def wire(amount: int) -> dict[str, Any]:
        """A gated side effect."""
        return {"wired": amount}

    script = [{"tool_calls": [call("c1", "wire", amount=1)]}, {"text": "done"}]
    await Agent(model=ScriptedModel(script), tools=[wire]).run("r", "go", journal=journal)
    await journal.cancel("r", by="ops")
    result = await Agent(model=ScriptedModel(script), tools=[wire]).resume("r", journal=journal)
    assert result.status is RunStatus.CANCELLED
    with pytest.raises(ConflictError, match="'r' has ended"):
        await journal.approve("r", "c1", by="alice")
