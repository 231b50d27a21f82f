"""Sub-agents as durable child runs: ids derived from parent and call, links both ways, a child
replayed rather than run again, a halted child making its parent wait, cancel cascading."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime import Journal, Resolution, Safety
from runtime.children import child_run_id
from runtime.errors import ConfigError
from tests.runtime import children_agents as A


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("BIDE_TEST_LEDGER", str(path))
    return path


def test_child_run_ids_are_readable_and_never_collide() -> None:
    assert child_run_id("inv-7", "c3") == "inv-7/c3"
    assert child_run_id("a/b", "c") != child_run_id("a", "b/c")
    assert child_run_id("a", "b/c") == "a/b%2Fc"
    assert child_run_id("a", "%2F") != child_run_id("a", "/")
    long = child_run_id("p" * 250, "c1")
    assert len(long) <= 256 and long != child_run_id("p" * 250, "c2")


def test_the_child_tool_s_safety_is_what_its_tools_make_it() -> None:
    assert A.reader().as_tool().spec.safety is Safety.READ_ONLY
    assert A.biller().as_tool().spec.safety is Safety.SIDE_EFFECT


async def test_a_child_run_is_durable_and_linked_both_ways(journal: Journal) -> None:
    front = A.parent(A.reader())
    result = await front.run("p-1", "look ann up", journal=journal)
    assert result.status.value == "completed" and result.output == "done"
    child = await journal.require("p-1/c1")
    assert child.end is not None and child.end.payload["output"] == "ann is on pro"
    assert child.start is not None
    assert child.start["parent"] == {"run_id": "p-1", "call_id": "c1"}
    parent = await journal.require("p-1")
    value = parent.calls["c1"].result
    assert value is not None and value.payload["value"]["child_run"] == "p-1/c1"
    # Driving the parent again replays it all: the child is not asked anything again.
    again = A.parent(A.reader())
    assert (await again.run("p-1", "look ann up", journal=journal)).output == "done"


async def test_a_child_tool_outside_a_run_says_so() -> None:
    with pytest.raises(ConfigError, match="only as a tool of an agent's run"):
        await A.reader().as_tool().call({"input": "x"})


async def test_a_halted_child_makes_its_parent_wait_then_both_finish_once_resolved(
    journal: Journal,
) -> None:
    """The child's charge dies after its marker: the child halts, its parent waits on it with
    the reason; resolving the child's call and resuming the parent finishes both, one charge."""
    crashed = await _crash_child_after_marker(journal)
    assert crashed.status.value == "waiting"
    (waiting,) = crashed.waiting
    assert waiting.call_id == "c1" and "p-2/c1 is halted" in str(waiting.prompt)
    child = await journal.require("p-2/c1")
    assert [c.call.id for c in child.halted_calls()] == ["k1"]
    assert await journal.status("p-2") == "waiting"
    # Resuming the parent before the child is settled waits again; nothing runs twice.
    still = await A.parent().resume("p-2", journal=journal)
    assert still.status.value == "waiting" and A.charges() == []
    await journal.resolve("p-2/c1", "k1", Resolution.succeeded({"charged": 5}), by="alice")
    done = await A.parent().resume("p-2", journal=journal)
    assert done.status.value == "completed" and done.output == "done"
    assert (await journal.require("p-2/c1")).end is not None
    assert A.charges() == []  # the charge never left (it died after its marker): none counted
    page = await journal.list_runs(prefix="p-2")
    assert sorted(r.run_id for r in page.runs) == ["p-2", "p-2/c1"]  # one child, never two


async def _crash_child_after_marker(journal: Journal) -> object:
    """The child's charge halts as if its process died after the marker: its tool raises an
    unknown outcome the first time."""
    from runtime import ToolOutcomeUnknown, tool
    from runtime.testing import ScriptedModel

    @tool(name="charge")
    async def lost(customer: str, amount: int) -> dict[str, object]:
        """Charge; the connection drops after the request left."""
        raise ToolOutcomeUnknown("the connection dropped after the request left")

    from runtime import Agent

    call = {"id": "k1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "charged ann 5"}])
    child = Agent(model=model, tools=[lost], name="biller")
    return await A.parent(child).run("p-2", "bill ann", journal=journal)


async def test_cancelling_the_parent_cancels_its_open_child(journal: Journal) -> None:
    crashed = await _crash_child_after_marker(journal)
    assert crashed.status.value == "waiting"  # type: ignore[attr-defined]
    await journal.cancel("p-2", by="bob")
    ended = await A.parent().resume("p-2", journal=journal)
    assert ended.status.value == "cancelled"
    child = await journal.require("p-2/c1")
    assert child.cancel is not None and "p-2 was cancelled" in str(child.cancel.payload)


async def test_the_parent_s_events_say_when_its_child_started_and_ended(journal: Journal) -> None:
    from runtime.events import ChildEnded, ChildStarted, RunStarted

    assert (await A.parent().run("p-3", "bill ann", journal=journal)).output == "done"
    events = [e async for e in journal.events("p-3", live=False)]
    started = next(e for e in events if isinstance(e, ChildStarted))
    ended = next(e for e in events if isinstance(e, ChildEnded))
    assert (started.call_id, started.child_run) == ("c1", "p-3/c1")
    assert (ended.child_run, ended.output) == ("p-3/c1", "charged ann 5")
    assert events.index(started) < events.index(ended)
    child = [e async for e in journal.events("p-3/c1", live=False)]
    assert isinstance(child[0], RunStarted) and child[0].parent == "p-3"
    assert len(A.charges()) == 1


async def test_a_worker_drives_a_submitted_parent_and_its_child_run_to_completion(
    journal: Journal,
) -> None:
    """A submitted parent, driven by a Worker: its call drives the child run in the worker's
    process to completion, once; the worker drives the parent, never the child under the
    parent's agent, and both runs end completed and linked."""
    from runtime import RunStatus, Worker

    agent = A.parent()
    submitted = await agent.submit("w", "bill ann", journal=journal)
    assert submitted.status is RunStatus.SUBMITTED
    async with Worker(journal, agent=agent, concurrency=2, poll=0.05) as worker:
        async with asyncio.timeout(30):
            while await journal.status("w") != "completed":
                await asyncio.sleep(0.02)
    assert worker.finished == {"w": "completed"}, worker.finished
    assert worker.skipped == {}
    child = await journal.require("w/c1")
    assert child.end is not None and child.end.payload["status"] == "completed"
    assert child.end.payload["output"] == "charged ann 5"
    assert child.start is not None and child.start["parent"] == {"run_id": "w", "call_id": "c1"}
    assert len(A.charges()) == 1
    parent = await journal.require("w")
    assert parent.end is not None and parent.end.payload["output"] == "done"
    (c1,) = parent.calls.values()
    assert c1.result is not None
    assert c1.result.payload["value"] == {"child_run": "w/c1", "output": "charged ann 5"}
    page = await journal.list_runs(prefix="w")
    assert sorted(r.run_id for r in page.runs) == ["w", "w/c1"]
