"""Found by the two-driver schedules: a driver that is still going after another driver completed
the run must not write over the run index's ``completed`` (``list --status completed`` reads
that index), and appends nothing after the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    AssistantTurn,
    Journal,
    LeaseLost,
    Owner,
    RunStatus,
    ToolContext,
    ToolSpec,
    tool,
)
from runtime.messages import Message
from runtime.testing import ScriptedModel
from tests.cli.invoke import child

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {}}]},
    {"text": "done"},
]


class HeldModel:
    """Answers like ScriptedModel, but its first answer waits until ``release`` is set."""

    def __init__(self, script: Sequence[Mapping[str, Any]]):
        self.inner = ScriptedModel(script)
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        self.asked.set()
        await self.release.wait()
        return await self.inner.complete(system_prompt, messages, tools)


async def test_a_driver_whose_lease_was_taken_over_is_fenced_and_leaves_the_index_completed(
    db_path: Path,
) -> None:
    fired: list[str] = []

    @tool
    async def charge(context: ToolContext) -> dict[str, Any]:
        """A side effect."""
        fired.append(context.call_id)
        return {"charged": True}

    held = HeldModel(SCRIPT)
    slow_driver = Agent(model=held, tools=[charge])
    fast_driver = Agent(model=ScriptedModel(SCRIPT), tools=[charge])
    async with Journal(db_path) as journal:
        # The slow driver starts the run and reads its journal, then waits on its model...
        slow = asyncio.create_task(slow_driver.run("r", "go", journal=journal))
        await held.asked.wait()
        # ...its owner is presumed dead (its lease taken over), and another drive ends the run.
        lease = await journal.lease("r")
        assert lease is not None
        taken = await journal.store.acquire("r", Owner.here(), ttl=15, take_over=lease.epoch)
        await journal.store.release(taken)
        done = await fast_driver.run("r", "go", journal=journal)
        assert done.status is RunStatus.COMPLETED
        before = len(await journal.store.load("r"))
        held.release.set()
        # Its turn is refused inside the store: it appends nothing and runs nothing.
        with pytest.raises(LeaseLost, match="taken over"):
            await slow
        assert fired == ["c1"]
        assert len(await journal.store.load("r")) == before
        state = await journal.require("r")
        assert state.status() == "completed"
        row = await journal.run_row("r")
    assert row is not None
    listed = child("list", "--status", "completed", "--json", "--db", str(db_path))
    assert [r["run_id"] for r in listed.json()["runs"]] == ["r"], "list --status completed"
    assert row.status == "completed"
