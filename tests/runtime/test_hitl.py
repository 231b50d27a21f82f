"""Human in the loop: approval gates (1-of-1, signed m-of-n), interrupts, across restarts."""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runtime import (
    Agent,
    ApprovalPolicy,
    ConfigError,
    ConflictError,
    Journal,
    RunStatus,
    Safety,
    ToolContext,
    single_approval,
    tool,
)
from runtime.approval import Decision, decision_bytes, sign_decision
from runtime.testing import ScriptedModel
from tests.conftest import child_env
from tests.helpers import Ledger, call

KEYS = {name: Ed25519PrivateKey.generate() for name in ("alice", "bob", "carol")}
TWO_OF_THREE = ApprovalPolicy(need=2, approvers={n: k.public_key() for n, k in KEYS.items()})
ARGS = {"account": "acme", "amount": 500}
SCRIPT = [{"tool_calls": [call("c1", "wire", **ARGS)]}, {"text": "wired"}]


def gated_agent(ledger: Ledger, policy: ApprovalPolicy | None, script: Any = SCRIPT) -> Agent:
    @tool(approval=policy)
    async def wire(account: str, amount: int) -> dict[str, Any]:
        """Wire money (a side effect behind a gate)."""
        ledger.executions.append(("wire", {"amount": amount}, None))
        return {"wired": amount}

    return Agent(model=ScriptedModel(script), tools=[wire])


def signed(approver: str, approve: bool = True, arguments: Any = ARGS, run_id: str = "r") -> Any:
    return sign_decision(
        KEYS[approver],
        run_id=run_id,
        call_id="c1",
        tool="wire",
        arguments=arguments,
        approver=approver,
        approve=approve,
    )


async def test_a_gated_call_waits_before_it_runs_and_the_pause_writes_nothing(
    journal: Journal,
) -> None:
    ledger = Ledger()
    result = await gated_agent(ledger, single_approval()).run("r", "go", journal=journal)
    assert result.status is RunStatus.WAITING
    (waiting,) = result.waiting
    assert (waiting.kind, waiting.call_id, waiting.tool, waiting.arguments) == (
        "approval",
        "c1",
        "wire",
        ARGS,
    )
    assert waiting.policy == {"need": 1, "approvers": {}}
    assert waiting.tally is not None and waiting.tally["outcome"] == "pending"
    state = await journal.require("r")
    assert state.status() == "waiting"
    kinds = [r.kind for r in state.records]
    assert kinds == ["header", "start", "turn"], "a pause needs no record of its own"
    again = await gated_agent(ledger, single_approval()).resume("r", journal=journal)
    assert again.status is RunStatus.WAITING
    assert ledger.executions == []
    row = await journal.run_row("r")
    assert row is not None and row.status == "waiting"


async def test_a_single_approval_survives_a_restart_and_the_tool_runs_once(db_path: Path) -> None:
    ledger = Ledger()
    async with Journal(db_path) as j:
        await gated_agent(ledger, single_approval()).run("r", "go", journal=j)
    async with Journal(db_path) as j:
        counted, tally, _ = await j.approve("r", "c1", by="alice")
        assert counted and tally.outcome == "approved" and tally.approvals == ("alice",)
    async with Journal(db_path) as j:
        result = await gated_agent(ledger, single_approval()).resume("r", journal=j)
        again = await gated_agent(ledger, single_approval()).resume("r", journal=j)
    assert result.status is RunStatus.COMPLETED and again.status is RunStatus.COMPLETED
    assert ledger.count("wire") == 1


async def test_a_denial_is_final_an_error_result_the_model_sees_and_the_tool_never_runs(
    db_path: Path,
) -> None:
    ledger = Ledger()
    async with Journal(db_path) as j:
        await gated_agent(ledger, single_approval()).run("r", "go", journal=j)
        await j.approve("r", "c1", by="bob", deny=True)
    async with Journal(db_path) as j:
        result = await gated_agent(ledger, single_approval()).resume("r", journal=j)
        assert result.status is RunStatus.COMPLETED
        content, is_error = (await j.require("r")).calls["c1"].message_content()
        assert is_error and content["type"] == "approval_denied" and "bob" in content["message"]
        # The run has ended: a late approval is refused and changes nothing.
        with pytest.raises(ConflictError, match="has ended"):
            await j.approve("r", "c1", by="carol")
    assert ledger.executions == []


async def test_two_of_three_counts_only_valid_first_decisions(journal: Journal) -> None:
    ledger = Ledger()
    await gated_agent(ledger, TWO_OF_THREE).run("r", "go", journal=journal)
    # A forged signature: bob's name, mallory's key.
    forged = sign_decision(
        Ed25519PrivateKey.generate(),
        run_id="r",
        call_id="c1",
        tool="wire",
        arguments=ARGS,
        approver="bob",
        approve=True,
    )
    counted, tally, _ = await journal.decide("r", "c1", forged)
    assert not counted and tally.approvals == () and tally.ignored == 1
    # Carol approved other arguments: her signature does not verify for this call.
    counted, tally, _ = await journal.decide("r", "c1", signed("carol", arguments={"amount": 5}))
    assert not counted and tally.outcome == "pending"
    # An unknown approver.
    outsider = Decision("mallory", True, b"\0" * 64)
    counted, tally, _ = await journal.decide("r", "c1", outsider)
    assert not counted
    counted, tally, _ = await journal.decide("r", "c1", signed("alice"))
    assert counted and tally.approvals == ("alice",) and tally.outcome == "pending"
    # The same decision again is a no-op.
    counted, tally, _ = await journal.decide("r", "c1", signed("alice"))
    assert not counted and tally.approvals == ("alice",)
    assert (await gated_agent(ledger, TWO_OF_THREE).resume("r", journal=journal)).status is (
        RunStatus.WAITING
    )
    counted, tally, _ = await journal.decide("r", "c1", signed("bob"))
    assert counted and tally.outcome == "approved"
    assert ledger.executions == []
    result = await gated_agent(ledger, TWO_OF_THREE).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and ledger.count("wire") == 1
    state = await journal.require("r")
    decisions = [r for r in state.records if r.kind == "decision"]
    assert len(decisions) == 5, "every distinct submission is journaled as seen"


async def test_two_of_three_is_denied_once_two_approvals_are_unreachable(journal: Journal) -> None:
    ledger = Ledger()
    await gated_agent(ledger, TWO_OF_THREE).run("r", "go", journal=journal)
    await journal.decide("r", "c1", signed("alice", approve=False))
    _, tally, _ = await journal.decide("r", "c1", signed("bob", approve=False))
    assert tally.outcome == "denied"
    result = await gated_agent(ledger, TWO_OF_THREE).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    # The run has ended: a late approval is refused, and nothing is appended.
    records = len((await journal.require("r")).records)
    with pytest.raises(ConflictError, match="has ended"):
        await journal.decide("r", "c1", signed("carol"))
    assert len((await journal.require("r")).records) == records
    assert ledger.executions == []


async def test_an_approvers_first_decision_counts_not_a_later_change_of_mind(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await gated_agent(ledger, TWO_OF_THREE).run("r", "go", journal=journal)
    await journal.decide("r", "c1", signed("alice", approve=False))
    counted, tally, _ = await journal.decide("r", "c1", signed("alice", approve=True))
    assert not counted and tally.denials == ("alice",) and tally.approvals == ()


async def test_an_unsigned_decision_for_a_signed_gate_is_refused_and_not_recorded(
    journal: Journal,
) -> None:
    await gated_agent(Ledger(), TWO_OF_THREE).run("r", "go", journal=journal)
    with pytest.raises(ConfigError, match="signed"):
        await journal.approve("r", "c1", by="alice")
    assert [r.kind for r in (await journal.require("r")).records if r.kind == "decision"] == []


async def test_an_approval_does_not_carry_over_to_a_tightened_policy(journal: Journal) -> None:
    ledger = Ledger()
    loose = ApprovalPolicy(need=1, approvers={"alice": KEYS["alice"].public_key()})
    await gated_agent(ledger, loose).run("r", "go", journal=journal)
    _, tally, _ = await journal.decide("r", "c1", signed("alice"))
    assert tally.outcome == "approved"
    result = await gated_agent(ledger, TWO_OF_THREE).resume("r", journal=journal)
    assert result.status is RunStatus.WAITING
    assert result.waiting[0].tally is not None and result.waiting[0].tally["approvals"] == []
    assert ledger.executions == []


def test_the_decision_bytes_layout_is_length_prefixed_fields() -> None:
    raw = decision_bytes(
        run_id="r",
        call_id="c1",
        tool="wire",
        arguments={"b": 1, "a": 2},
        approver="alice",
        approve=True,
    )
    fields = []
    while raw:
        n = int.from_bytes(raw[:4], "big")
        fields.append(raw[4 : 4 + n].decode())
        raw = raw[4 + n :]
    import hashlib

    digest = hashlib.sha256(b'{"a":2,"b":1}').hexdigest()
    assert fields == ["bide/approval/v1", "r", "c1", "wire", digest, "alice", "approve"]


# --- interrupts -----------------------------------------------------------------------------


def asking_agent(ledger: Ledger, safety: Safety = Safety.READ_ONLY) -> Agent:
    @tool(safety=safety)
    async def quote(item: str, context: ToolContext) -> dict[str, Any]:
        """Ask a person for a price, then quote it."""
        ledger.executions.append(("quote", {"item": item}, None))
        price = await context.interrupt("price", f"What should {item} cost?", expect=int)
        return {"item": item, "price": price}

    script = [{"tool_calls": [call("c1", "quote", item="widget")]}, {"text": "quoted"}]
    return Agent(model=ScriptedModel(script), tools=[quote])


async def test_an_interrupt_pauses_the_run_and_the_answer_reaches_the_rerun_tool(
    db_path: Path,
) -> None:
    ledger = Ledger()
    async with Journal(db_path) as j:
        result = await asking_agent(ledger).run("r", "go", journal=j)
        assert result.status is RunStatus.WAITING
        (waiting,) = result.waiting
        assert (waiting.kind, waiting.key, waiting.prompt) == (
            "input",
            "price",
            "What should widget cost?",
        )
        assert waiting.schema == {"type": "integer"}
        assert (await j.require("r")).status() == "waiting"
    async with Journal(db_path) as j:
        with pytest.raises(ConfigError, match="does not fit"):
            await j.answer("r", "price", "cheap")
        assert await j.answer("r", "price", 42, by="sam")
        assert not await j.answer("r", "price", 42)
        with pytest.raises(ConflictError):
            await j.answer("r", "price", 43)
    async with Journal(db_path) as j:
        result = await asking_agent(ledger).resume("r", journal=j)
        assert result.status is RunStatus.COMPLETED
        content, _ = (await j.require("r")).calls["c1"].message_content()
    assert content == {"item": "widget", "price": 42}
    assert ledger.count("quote") == 2


async def test_an_answer_that_does_not_fit_records_nothing(journal: Journal) -> None:
    await asking_agent(Ledger()).run("r", "go", journal=journal)
    before = len((await journal.require("r")).records)
    with pytest.raises(ConfigError, match="does not fit"):
        await journal.answer("r", "price", {"not": "an int"})
    with pytest.raises(ConfigError, match="no question"):
        await journal.answer("r", "colour", "red")
    assert len((await journal.require("r")).records) == before


async def test_an_interrupt_from_a_side_effect_tool_is_a_config_error(journal: Journal) -> None:
    ledger = Ledger()
    with pytest.raises(ConfigError, match="SIDE_EFFECT"):
        await asking_agent(ledger, Safety.SIDE_EFFECT).run("r", "go", journal=journal)
    # It may have acted before asking: the attempt stands and a resume halts on it.
    result = await asking_agent(ledger, Safety.SIDE_EFFECT).resume("r", journal=journal)
    assert result.status is RunStatus.HALTED


# --- the tally across SIGKILL ----------------------------------------------------------------

CHILD = """
from runtime import faults
faults.arm_from_environment()
import asyncio, json, sys
from runtime import Agent, Journal, ApprovalPolicy, tool
from runtime.testing import ScriptedModel
from tests.runtime.test_hitl import SCRIPT

db, ledger_path, keys = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
policy = ApprovalPolicy(need=2, approvers={n: bytes.fromhex(k) for n, k in keys.items()})

@tool(approval=policy)
async def wire(account: str, amount: int) -> dict:
    with open(ledger_path, "a") as f:
        f.write("wired\\n")
        f.flush()
    return {"wired": amount}

async def main():
    async with Journal(db) as j:
        agent = Agent(model=ScriptedModel(SCRIPT), tools=[wire])
        print((await agent.run("r", "go", journal=j)).status.value)

asyncio.run(main())
"""


def test_the_tally_survives_sigkill_at_every_write(tmp_path: Path) -> None:
    import json

    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    keys = {
        n: k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        for n, k in KEYS.items()
    }

    async def prepare(db: Path) -> None:
        async with Journal(db) as j:
            await j.decide("r", "c1", signed("alice"))
            await j.decide("r", "c1", signed("bob"))

    def drive(db: Path, ledger: Path, crash: str | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", CHILD, str(db), str(ledger), json.dumps(keys)],
            env=child_env(**({"BIDE_CRASH": crash} if crash else {})),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def crash_then_resume(k: int, when: str) -> tuple[int, list[str], int]:
        """Kill the approved drive at its K-th write, drive again: exit, statuses, charges."""
        db, ledger = tmp_path / f"{k}{when}.db", tmp_path / f"{k}{when}.ledger"
        shutil.copyfile(template, db)
        crashed = drive(db, ledger, f"write.{when}_commit@{k}")
        statuses = [drive(db, ledger, None).stdout.splitlines()[-1]]
        fired = ledger.read_text().count("wired") if ledger.exists() else 0
        return crashed.returncode, statuses, fired

    template = tmp_path / "template.db"
    first = drive(template, tmp_path / "unused.ledger", None)
    assert first.stdout.splitlines()[-1] == "waiting", first.stderr
    asyncio.run(prepare(template))
    # Writes of the approved drive: the (no-op) create, tally, marker, result, turn 2, end; the
    # K-th write is where the kill lands, before or after its commit. Each kill has its own
    # copy of the journal and its own ledger: two run at a time.
    kills = [(k, when) for k in range(2, 8) for when in ("before", "after")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ends = list(pool.map(lambda kill: crash_then_resume(*kill), kills))
    killed_somewhere = False
    for (k, when), (code, statuses, fired) in zip(kills, ends, strict=True):
        killed_somewhere |= code == -signal.SIGKILL
        assert fired <= 1, (k, when)
        assert statuses[-1] in ("completed", "halted"), (k, when, statuses)
        if statuses[-1] == "completed":
            assert fired == 1, (k, when)
    assert killed_somewhere


async def test_a_denial_is_final_for_a_single_approval_gate(journal: Journal) -> None:
    ledger = Ledger()
    await gated_agent(ledger, single_approval()).run("r", "go", journal=journal)
    denied = await journal.approve("r", "c1", by="bob", deny=True)
    assert denied.counted and denied.tally.outcome == "denied"
    late = await journal.approve("r", "c1", by="alice")
    assert not late.counted
    assert late.reason == "the gate was already decided: denied by bob"
    assert late.tally.outcome == "denied" and late.tally.approvals == ()
    result = await gated_agent(ledger, single_approval()).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert ledger.executions == []
    state = await journal.require("r")
    assert state.calls["c1"].result is not None
    assert state.calls["c1"].result.payload["error"]["type"] == "approval_denied"


async def test_the_first_decision_decides_a_single_approval_gate(journal: Journal) -> None:
    ledger = Ledger()
    await gated_agent(ledger, single_approval()).run("r", "go", journal=journal)
    assert (await journal.approve("r", "c1", by="alice")).counted
    late = await journal.approve("r", "c1", by="bob", deny=True)
    assert not late.counted and late.reason == "the gate was already decided: approved by alice"
    result = await gated_agent(ledger, single_approval()).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and ledger.count("wire") == 1


async def test_a_gate_journaled_with_the_turn_binds_a_build_that_dropped_it(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await gated_agent(ledger, TWO_OF_THREE).run("r", "go", journal=journal)
    result = await gated_agent(ledger, None).resume("r", journal=journal)
    assert result.status is RunStatus.WAITING
    assert result.waiting[0].policy == TWO_OF_THREE.to_json()
    assert ledger.executions == []
    await journal.decide("r", "c1", signed("alice"))
    await journal.decide("r", "c1", signed("carol"))
    result = await gated_agent(ledger, None).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and ledger.count("wire") == 1


async def test_a_journaled_side_effect_stays_one_under_a_build_that_calls_it_read_only(
    journal: Journal,
) -> None:
    ledger = Ledger()
    await gated_agent(ledger, single_approval()).run("r", "go", journal=journal)
    await journal.approve("r", "c1", by="alice")

    @tool(safety=Safety.READ_ONLY)
    async def wire(account: str, amount: int) -> dict[str, Any]:
        """The same tool, relabelled read-only and ungated by a careless redeploy."""
        ledger.executions.append(("wire", {"amount": amount}, None))
        return {"wired": amount}

    agent = Agent(model=ScriptedModel(SCRIPT), tools=[wire])
    result = await agent.resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED and ledger.count("wire") == 1
    state = await journal.require("r")
    assert state.calls["c1"].markers, "it ran as a side effect: its attempt marker came first"
    assert state.calls["c1"].result is not None
    assert state.calls["c1"].result.payload["safety"] == "side_effect"
