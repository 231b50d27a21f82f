"""Runs written record by record, for statuses no agent of this checkout reaches on its own."""

from __future__ import annotations

from runtime import AssistantTurn, Journal, ToolCall, single_approval
from runtime import records as R


async def waiting_run(journal: Journal, run_id: str, *, on: str = "approval") -> None:
    """A run whose one call waits for an approval (``on="approval"``) or an answer (``"input"``),
    as the records of a driver that paused there would have it."""
    store = journal.store
    await store.create_run(run_id, agent="gated")
    await store.append(
        run_id,
        R.START,
        R.START,
        {"input": "pay ann", "agent": "gated", "spec": "tests.cli.agents:agent", "settings": {}},
    )
    call = ToolCall("c1", "charge", {"customer": "ann", "amount": 5})
    turn = AssistantTurn(tool_calls=(call,), finish_reason="tool_calls")
    if on == "approval":
        plan = {"safety": "side_effect", "approval": single_approval().to_json()}
    else:
        plan = {"safety": "read_only", "approval": None}
    await store.append(
        run_id,
        R.turn_key(1),
        R.TURN,
        {"n": 1, "turn": turn.to_json(), "plan": {"c1": plan}},
        index={"turns": 1},
    )
    if on == "input":
        await store.append(
            run_id,
            R.interrupt_key("c1", "amount"),
            R.INTERRUPT,
            {"call_id": "c1", "key": "amount", "prompt": "How much, in cents?"},
        )
    await store.update_index(run_id, status="waiting")


async def decided_run(journal: Journal, run_id: str) -> None:
    """A waiting run whose gate was approved by alice and whose question bob answered, with the
    payloads the approval gate and ``Journal.answer`` write."""
    await waiting_run(journal, run_id, on="approval")
    store = journal.store
    decision = {"approver": "alice", "approve": True, "signature": None}
    digest = single_approval().digest  # the policy waiting_run's turn recorded for c1
    await store.append(
        run_id,
        "decision/c1/0a1b",
        R.DECISION,
        {"call_id": "c1", "decision": decision, "policy": digest},
    )
    tally = {"outcome": "approved", "need": 1, "approvals": ["alice"], "denials": [], "ignored": 0}
    await store.append(
        run_id,
        R.tally_key("c1", digest),
        R.TALLY,
        {"call_id": "c1", "policy": digest, "tally": tally},
    )
    await store.append(
        run_id,
        R.interrupt_key("c1", "memo"),
        R.INTERRUPT,
        {"call_id": "c1", "key": "memo", "prompt": "Memo line?", "schema": {"type": "string"}},
    )
    await store.append(
        run_id,
        R.answer_key("c1", "memo"),
        R.ANSWER,
        {"call_id": "c1", "key": "memo", "value": "May invoice", "by": "bob"},
    )
