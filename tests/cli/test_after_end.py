"""Nothing is appended to a run after its end; a journal that shows otherwise is flagged."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import Agent, ConflictError, Journal, Resolution, RunStatus, single_approval, tool
from runtime.testing import ScriptedModel
from tests.cli.invoke import Cli
from tests.helpers import call


async def test_a_late_driver_appends_only_evidence_after_the_end_and_the_run_is_flagged(
    db_path: Path,
) -> None:
    """Without ownership an operator can resolve an in-flight call "not executed"; a second
    driver then finishes the run. The first driver's late result is kept as evidence, nothing
    else follows the end, and the journal says the effect may have acted twice."""
    started = asyncio.Event()
    charges: list[int] = []

    @tool
    async def charge(amount: int) -> dict[str, int]:
        """A charge; the first one is slow."""
        charges.append(amount)
        if len(charges) == 1:
            started.set()
            await asyncio.sleep(0.5)
        return {"charged": amount}

    script = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]
    async with Journal(db_path) as j1, Journal(db_path) as j2:
        first = asyncio.create_task(
            Agent(model=ScriptedModel(script), tools=[charge]).run("r", "go", journal=j1)
        )
        await started.wait()
        assert await j2.resolve("r", "c1", Resolution.not_executed(), by="ops")
        second = await Agent(model=ScriptedModel(script), tools=[charge]).resume("r", journal=j2)
        assert second.status is RunStatus.COMPLETED
        late = await first  # its late result is kept; it reports the run as it ended
        assert late.status is RunStatus.COMPLETED
        state = await j2.require("r")
    assert charges == [5, 5]
    assert state.end is not None
    after = [r.key for r in state.records if r.seq > state.end.seq]
    assert after == ["late/c1/1"]
    assert state.anomalies() == [
        "may have acted twice: call c1 (charge) has 2 attempts with results (1, 2)"
    ]


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
