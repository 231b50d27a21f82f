"""Usage limits over a tree of runs (``runtime.limits``, ``runtime.children``): a child run's
spending counts toward its parent's ``UsageLimits``, read from the child's records, so a resumed
parent keeps the count; a child checks its parent's limits too, and stops where they would be
exceeded. On SQLite and PostgreSQL (``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import Agent, Journal, RunStatus, UsageLimits
from runtime.errors import BudgetError
from runtime.testing import ScriptedModel
from tests.runtime import children_agents as A


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("BIDE_TEST_LEDGER", str(path))
    return path


def parent(
    limits: UsageLimits | None = None, *, max_turns: int = 10
) -> tuple[Agent, ScriptedModel]:
    """A parent that hands a charge to the biller (two model requests, one call), then answers."""
    child = A.biller()
    call = {"id": "c1", "name": child.name, "arguments": {"input": A.CHILD_INPUT}}
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "done"}])
    agent = Agent(
        model=model,
        tools=[child.as_tool()],
        name="front",
        usage_limits=limits,
        max_turns=max_turns,
    )
    return agent, model


async def test_a_child_s_requests_count_toward_its_parent_s_limit(journal: Journal) -> None:
    """One request of the parent and two of its child make three: the parent's next request
    would be the fourth, over requests=3 (counted alone, the parent made one)."""
    agent, model = parent(UsageLimits(requests=3))
    result = await agent.run("p", "bill ann", journal=journal)
    assert result.status is RunStatus.FAILED, result
    assert result.error == (
        "usage limit requests=3 reached: 3 model requests made, the next would exceed it"
    )
    assert model.calls == 1 and len(A.charges()) == 1
    assert await journal.status("p/c1") == "completed"


async def test_a_child_stops_where_its_parent_s_limit_would_be_exceeded(
    journal: Journal,
) -> None:
    """requests=2: the parent's one request and the child's first make two; the child's second
    would exceed its parent's limit, so the child fails naming it, and so does the parent."""
    agent, model = parent(UsageLimits(requests=2))
    result = await agent.run("p", "bill ann", journal=journal)
    child = await journal.require("p/c1")
    assert child.end is not None and child.end.payload["status"] == "failed"
    assert child.end.payload["error"] == (
        "usage limit requests=2 reached: 2 model requests made, the next would exceed it "
        "(the limit of p, counted over its child runs)"
    )
    assert len(A.charges()) == 1  # the charge of the child's first turn, once
    assert result.status is RunStatus.FAILED and model.calls == 1
    assert result.error is not None and result.error.startswith("usage limit requests=2 reached")


async def test_a_child_s_charge_is_not_run_over_its_parent_s_tool_call_limit(
    journal: Journal,
) -> None:
    """tool_calls=1: the parent's call of the child is the one; the child's charge would be the
    second, so it never runs and the child fails naming its parent's limit."""
    agent, _ = parent(UsageLimits(tool_calls=1))
    result = await agent.run("p", "bill ann", journal=journal)
    child = await journal.require("p/c1")
    assert child.end is not None and child.end.payload["status"] == "failed"
    assert "usage limit tool_calls=1 exceeded" in child.end.payload["error"]
    assert "the limit of p" in child.end.payload["error"]
    assert A.charges() == []
    # The parent's call answers the child's failure; the parent's own count is within limit.
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    (c1,) = (await journal.require("p")).calls.values()
    assert c1.result is not None and "failed" in str(c1.result.payload)


async def test_a_resumed_parent_counts_what_its_child_spent_from_the_journal(
    journal: Journal,
) -> None:
    """A parent stopped after its child completed (max_turns=1), resumed by a fresh agent with
    requests=3: its count comes from the records, the child's two requests included, and it
    fails before asking the model again; the child is not driven again."""
    first, _ = parent(max_turns=1)
    with pytest.raises(BudgetError):
        await first.run("p", "bill ann", journal=journal)
    assert await journal.status("p/c1") == "completed" and len(A.charges()) == 1
    again, model = parent(UsageLimits(requests=3))
    result = await again.resume("p", journal=journal)
    assert result.status is RunStatus.FAILED, result
    assert result.error == (
        "usage limit requests=3 reached: 3 model requests made, the next would exceed it"
    )
    assert model.calls == 0 and len(A.charges()) == 1
