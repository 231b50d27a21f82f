"""The timeline of a run, told from its records: kinds in commit order, halts, resolutions."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runtime import (
    Agent,
    ApprovalPolicy,
    Journal,
    Resolution,
    ToolOutcomeUnknown,
    single_approval,
    tool,
)
from runtime import records as R
from runtime.approval import sign_decision
from runtime.state import RunState
from runtime.terminal import clip, printable
from runtime.testing import ScriptedModel
from runtime.timeline import Unreadable, read, render, timeline
from tests.cli.journals import decided_run, waiting_run
from tests.helpers import Ledger, call, make_tools

SCRIPT = [
    {"tool_calls": [call("c1", "lookup", customer="ann")]},
    {"tool_calls": [call("c2", "charge", customer="ann", amount=5)]},
    {"text": "charged"},
]


def payments(ledger: Ledger, *, charge_fails: bool = False) -> Agent:
    tools = make_tools(ledger)
    if charge_fails:

        @tool(name="charge")
        async def lost_charge(customer: str, amount: int) -> dict[str, Any]:
            raise ToolOutcomeUnknown("the connection dropped after the request left")

        tools["charge"] = lost_charge
    return Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values()))


async def test_a_completed_run_is_told_record_by_record_in_commit_order(journal: Journal) -> None:
    await payments(Ledger()).run("r", "charge ann", journal=journal, spec="m:agent")
    told = timeline(await journal.require("r"))
    assert [e.kind for e in told.events] == [
        "start",
        "turn",
        "result",
        "turn",
        "attempt",
        "result",
        "turn",
        "end",
    ]
    assert [e.seq for e in told.events] == sorted(e.seq for e in told.events)
    assert (told.status, told.spec, told.input, told.output) == (
        "completed",
        "m:agent",
        "charge ann",
        "charged",
    )
    text = "\n".join(render(told))
    assert "c1 lookup [read_only]" in text
    assert "c2 charge [side_effect]" in text
    assert "attempt 1 marked" in text
    assert 'completed: "charged"' in text
    json.dumps(told.to_json())  # the JSON shape is JSON


async def test_a_halted_call_is_the_stop_and_its_resolution_names_who_and_why(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await payments(ledger, charge_fails=True).run("r", "go", journal=journal)
    halted = timeline(await journal.require("r"))
    assert halted.status == "halted"
    (stop,) = halted.halted
    marker = next(e for e in halted.events if e.kind == "attempt")
    assert (stop.call_id, stop.tool, stop.safety, stop.attempted_at_ms) == (
        "c2",
        "charge",
        "side_effect",
        marker.at_ms,
    )
    assert any(line.startswith("halted: c2 charge was attempted") for line in render(halted))

    await journal.resolve(
        "r", "c2", Resolution.succeeded({"ok": 1}), by="alice", evidence="bank statement"
    )
    resolved = timeline(await journal.require("r"))
    assert resolved.halted == () and resolved.status == "orphaned"  # nobody drives it now
    event = resolved.events[-1]
    assert (event.label, event.call_id) == ("resolved", "c2")
    assert event.lines == (
        'c2 charge attempt 1: succeeded -> {"ok": 1}',
        'by alice; evidence: "bank statement"',
    )


async def test_a_not_executed_resolution_says_the_call_may_run_again(journal: Journal) -> None:
    await payments(Ledger(), charge_fails=True).run("r", "go", journal=journal)
    await journal.resolve("r", "c2", Resolution.not_executed(), by="bob")
    event = timeline(await journal.require("r")).events[-1]
    assert event.lines[0] == "c2 charge attempt 1: not executed (the call may be attempted again)"


async def test_a_waiting_run_names_the_approval_or_the_question_it_waits_for(
    journal: Journal,
) -> None:
    await waiting_run(journal, "gate", on="approval")
    await waiting_run(journal, "ask", on="input")
    gate = timeline(await journal.require("gate"))
    ask = timeline(await journal.require("ask"))
    assert gate.status == ask.status == "waiting"
    assert [s.to_json() for s in gate.waiting] == [
        {
            "kind": "approval",
            "call_id": "c1",
            "tool": "charge",
            "arguments": {"customer": "ann", "amount": 5},
            "tally": {
                "outcome": "pending",
                "need": 1,
                "approvals": [],
                "denials": [],
                "ignored": 0,
            },
        }
    ]
    assert [(s.kind, s.key, s.prompt) for s in ask.waiting] == [
        ("input", "amount", "How much, in cents?")
    ]
    assert "c1 charge [side_effect, needs approval]" in "\n".join(render(gate))
    assert "waiting: c1 charge asks " in "\n".join(render(ask))


async def test_a_cancel_request_is_told_with_who_and_why(journal: Journal) -> None:
    await waiting_run(journal, "r")
    await journal.cancel("r", reason="customer withdrew", by="carol")
    told = timeline(await journal.require("r"))
    assert told.status == "cancelled"
    assert told.events[-1].lines == ('cancel requested by carol: "customer withdrew"',)


def test_clip_escapes_terminal_control_characters_and_bounds_the_length() -> None:
    shown = clip({"text": "\x1b[2J\x9b31m" + "x" * 500}, limit=60)
    assert "\x1b" not in shown and "\x9b" not in shown
    assert "\\u001b" in shown and "\\x9b" in shown
    assert len(shown) == 60 and shown.endswith("...")


async def test_decisions_the_gate_and_answers_are_told_with_who(journal: Journal) -> None:
    await decided_run(journal, "r")
    told = {e.label: e.lines[0] for e in timeline(await journal.require("r")).events}
    assert told["decision"] == "c1 charge approved by alice"
    assert told["gate"] == "c1 charge gate approved: 1 of 1 approvals (alice)"
    assert told["question"] == 'c1 charge asks "Memo line?" (memo)'
    assert told["answer"] == 'c1 charge memo = "May invoice" by bob'


def test_printable_escapes_every_bidirectional_control_and_keeps_other_text() -> None:
    controls = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    shown = printable(f"pay{controls}é👩\u200d💻\x1b")
    assert shown == (
        "pay\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c"
        "é👩\u200d💻\\x1b"
    )
    assert clip({"tool": "a\u202eb"}) == '{"tool": "a\\u202eb"}'


async def test_a_run_with_a_header_and_no_start_record_is_never_started(journal: Journal) -> None:
    """What a process killed right after the header leaves: not `running` (resume refuses it)."""
    await journal.store.create_run("r", agent="payments")
    told = timeline(await journal.require("r"))
    assert told.status == "never-started"
    assert any(line.startswith("never started: ") for line in render(told))
    assert not any("resume it" in line for line in render(told))


async def test_a_cancelled_run_keeps_its_unresolved_call_as_a_halt(journal: Journal) -> None:
    """Ending a run does not say what its call did: the call stays listed until resolved."""
    await payments(Ledger(), charge_fails=True).run("r", "go", journal=journal)
    await journal.cancel("r", by="carol")
    await payments(Ledger(), charge_fails=True).resume("r", journal=journal)
    state = await journal.require("r")
    assert state.end is not None and [c.call.id for c in state.unresolved_calls()] == ["c2"]
    told = timeline(state)
    assert told.status == "cancelled"
    assert [(s.kind, s.call_id) for s in told.halted] == [("halted", "c2")]
    assert any(line.startswith("unresolved: c2 charge was attempted") for line in render(told))


async def test_read_names_the_record_a_run_cannot_be_told_past(journal: Journal) -> None:
    await payments(Ledger()).run("r", "charge ann", journal=journal)
    records = await journal.store.load("r")
    broken = next(r for r in records if r.key == "turn/2")
    bad = [replace(broken, payload={"n": 2}) if r is broken else r for r in records]
    assert read("r", records, timeline) == timeline(RunState.fold("r", records))
    unreadable = read("r", bad, timeline)
    assert isinstance(unreadable, Unreadable)
    assert unreadable.reason == (
        f"record 'turn/2' of run 'r' (seq {broken.seq}) does not have the shape of a 'turn' "
        "record (no 'turn')"
    )


def _wire_agent(policy: ApprovalPolicy) -> Agent:
    @tool(approval=policy)
    async def wire(account: str, amount: int) -> dict[str, Any]:
        """Wire money behind a gate."""
        return {"wired": amount, "to": account}

    script = [
        {"tool_calls": [call("c1", "wire", account="acme", amount=500)]},
        {"text": "wired"},
    ]
    return Agent(model=ScriptedModel(script), tools=[wire])


BAD = "bad signature (not this call, these arguments or this approver's key)"


def _decisions(told: Any) -> list[str]:
    return [e.lines[0] for e in told.events if e.kind == "decision"]


async def test_every_signed_decision_that_did_not_count_says_why(journal: Journal) -> None:
    keys = {name: Ed25519PrivateKey.generate() for name in ("alice", "bob", "carol", "mallory")}
    public = {n: k.public_key().public_bytes_raw() for n, k in keys.items() if n != "mallory"}
    policy = ApprovalPolicy(need=2, approvers=public)
    await _wire_agent(policy).run("r", "pay acme", journal=journal)
    facts = {"run_id": "r", "call_id": "c1", "tool": "wire"}
    args = {"account": "acme", "amount": 500}

    def signed(by: str, *, key: str | None = None, approve: bool = True, **over: Any) -> Any:
        what = {**facts, "arguments": args, **over}
        return sign_decision(keys[key or by], approver=by, approve=approve, **what)

    await journal.decide("r", "c1", signed("alice"))
    await journal.decide("r", "c1", signed("mallory"))  # not an approver of this gate
    await journal.decide("r", "c1", signed("bob", key="alice"))  # forged: alice's key
    await journal.decide("r", "c1", signed("bob", arguments={**args, "amount": 5}))  # other args
    await journal.decide("r", "c1", signed("alice", approve=False))  # a change of mind
    await journal.store.append(  # what a build with another policy on the tool journaled
        "r",
        R.decision_key("c1", "older"),
        R.DECISION,
        {"call_id": "c1", "decision": signed("carol").to_json(), "policy": "0" * 64},
    )
    await journal.decide("r", "c1", signed("bob"))
    await journal.decide("r", "c1", signed("carol"))  # after 2 of 2 approved
    assert _decisions(timeline(await journal.require("r"))) == [
        "c1 wire approved by alice (signed)",
        "c1 wire approved by mallory (signed), not counted: 'mallory' is not an approver of "
        "this gate",
        f"c1 wire approved by bob (signed), not counted: {BAD}",
        f"c1 wire approved by bob (signed), not counted: {BAD}",
        "c1 wire denied by alice (signed), not counted: alice decided already",
        "c1 wire approved by carol (signed), not counted: made under another approval policy",
        "c1 wire approved by bob (signed)",
        "c1 wire approved by carol (signed), not counted: the gate was already decided: approved "
        "by alice, bob",
    ]


async def test_a_decision_after_a_one_of_one_gate_was_decided_says_it_did_not_count(
    journal: Journal,
) -> None:
    """The first decision decides a single-approval gate: a later approval is not what opened
    or closed it, and show says so."""
    await _wire_agent(single_approval()).run("r", "pay acme", journal=journal)
    await journal.approve("r", "c1", by="bob", deny=True)
    await journal.approve("r", "c1", by="alice")
    assert _decisions(timeline(await journal.require("r"))) == [
        "c1 wire denied by bob",
        "c1 wire approved by alice, not counted: the gate was already decided: denied by bob",
    ]


async def test_a_decision_after_the_journaled_tally_did_not_count(journal: Journal) -> None:
    agent = _wire_agent(single_approval())
    await agent.run("r", "pay acme", journal=journal)
    await journal.approve("r", "c1", by="alice")
    await agent.resume("r", journal=journal)  # journals the tally, runs the tool, completes
    await journal.store.append(
        "r",
        R.decision_key("c1", "late"),
        R.DECISION,
        {
            "call_id": "c1",
            "decision": {"approver": "bob", "approve": False, "signature": None},
            "policy": single_approval().digest,
        },
    )
    assert _decisions(timeline(await journal.require("r")))[-1] == (
        "c1 wire denied by bob, not counted: the gate was already decided: approved by alice"
    )


async def test_read_names_a_record_that_folds_but_cannot_be_told(journal: Journal) -> None:
    """A start record that is not an object folds (it is kept as is), but the run cannot be
    told from it: the record named is that start, neither the header before it nor the last."""
    await payments(Ledger()).run("r", "charge ann", journal=journal)
    records = await journal.store.load("r")
    start = next(r for r in records if r.key == "start")
    assert records[0].key == "header" and records[-1].key == "end"
    bad = [replace(start, payload=["charge ann"]) if r is start else r for r in records]
    RunState.fold("r", bad)  # the fold itself holds
    unreadable = read("r", bad, timeline)
    assert isinstance(unreadable, Unreadable)
    assert unreadable.reason.startswith(
        f"record 'start' of run 'r' cannot be read (seq {start.seq}): AttributeError"
    )
