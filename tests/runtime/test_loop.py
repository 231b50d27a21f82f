"""What one drive leaves behind: a finished drive is freed by reference counting, so that many
runs in one process do not fill the cyclic collector's oldest generation with dead drives."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from runtime import Agent, Journal, RunStatus, tool
from runtime.holding import Holding
from runtime.loop import RunDrive
from runtime.state import RunState
from runtime.testing import ScriptedModel
from tests.helpers import call


@tool
async def act() -> dict[str, Any]:
    """A side effect that succeeds."""
    return {"ok": True}


@tool
async def lost() -> dict[str, Any]:
    """A side effect whose outcome is unknown: the run halts on it."""
    raise RuntimeError("connection reset")


@contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """The objects that only the cyclic collector could free, made inside the block."""
    gc.collect()
    found: list[object] = []
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize(("tool_name", "status"), [("act", "completed"), ("lost", "halted")])
async def test_a_finished_drive_leaves_no_cyclic_garbage(
    journal: Journal, tool_name: str, status: str
) -> None:
    script = [{"tool_calls": [call("c1", tool_name)]}, {"text": "done"}]
    warm = Agent(model=ScriptedModel(script), tools=[act, lost])
    await warm.run("warm", "go", journal=journal)  # first use fills caches, not garbage
    agent = Agent(model=ScriptedModel(script), tools=[act, lost])
    with cyclic_garbage() as garbage:
        result = await agent.run("r", "go", journal=journal)
        assert result.status is RunStatus(status)
        del result
    kept = [type(o).__name__ for o in garbage if isinstance(o, RunDrive | RunState | Holding)]
    assert kept == [], "a drive's objects were freed only by the cyclic collector"
