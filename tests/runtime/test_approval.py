"""Approval policies without a journal: how a gate is built, and what ``judge`` counts and why."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from runtime.approval import (
    ApprovalPolicy,
    Decision,
    judge,
    sign_decision,
    single_approval,
    tally,
)
from runtime.errors import ConfigError

CALL: dict[str, Any] = {
    "run_id": "r",
    "call_id": "c1",
    "tool": "refund",
    "arguments": {"order": 7, "amount": 30},
}
KEYS = {name: Ed25519PrivateKey.generate() for name in ("ann", "bob", "cy")}


def raw(name: str) -> bytes:
    return KEYS[name].public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def two_of_three() -> ApprovalPolicy:
    return ApprovalPolicy(need=2, approvers={name: raw(name) for name in KEYS})


def signed(name: str, approve: bool = True, **changes: Any) -> Decision:
    return sign_decision(KEYS[name], **{**CALL, **changes}, approver=name, approve=approve)


def test_the_first_decision_decides_a_single_approval_and_later_ones_say_why_not() -> None:
    gate = single_approval()
    outcome, reasons = judge(
        gate,
        [(Decision("ann", True), gate.digest), (Decision("bob", False), gate.digest)],
        **CALL,
    )
    assert (outcome.outcome, outcome.approvals, outcome.denials) == ("approved", ("ann",), ())
    assert reasons == (None, "the gate was already decided: approved by ann")
    assert outcome.ignored == 1

    denied, _ = judge(gate, [(Decision("bob", False), gate.digest)], **CALL)
    assert (denied.outcome, denied.denials) == ("denied", ("bob",))


def test_two_of_three_needs_two_distinct_valid_signatures() -> None:
    gate = two_of_three()
    one = [(signed("ann"), gate.digest)]
    assert judge(gate, one, **CALL)[0].outcome == "pending"
    two = [*one, (signed("ann"), gate.digest), (signed("bob"), gate.digest)]
    outcome, reasons = judge(gate, two, **CALL)
    assert outcome.outcome == "approved"
    assert outcome.approvals == ("ann", "bob")
    assert reasons == (None, "ann decided already", None)


def test_two_of_three_is_denied_as_soon_as_two_approvals_cannot_be_reached() -> None:
    gate = two_of_three()
    decisions = [(signed("ann", False), gate.digest), (signed("bob", False), gate.digest)]
    outcome, reasons = judge(gate, decisions, **CALL)
    assert (outcome.outcome, outcome.denials, reasons) == ("denied", ("ann", "bob"), (None, None))


def test_each_decision_that_does_not_count_says_why() -> None:
    gate = two_of_three()
    stranger = Ed25519PrivateKey.generate()
    decisions = [
        (signed("ann"), single_approval().digest),
        (Decision("", True), gate.digest),
        (sign_decision(stranger, **CALL, approver="mallory"), gate.digest),
        (Decision("bob", True), gate.digest),
        (signed("bob", arguments={"order": 7, "amount": 3000}), gate.digest),
        (Decision("cy", True, signature=signed("ann").signature), gate.digest),
    ]
    outcome, reasons = judge(gate, decisions, **CALL)
    assert reasons == (
        "made under another approval policy",
        "no approver named",
        "'mallory' is not an approver of this gate",
        "bad signature (not this call, these arguments or this approver's key)",
        "bad signature (not this call, these arguments or this approver's key)",
        "bad signature (not this call, these arguments or this approver's key)",
    )
    assert (outcome.outcome, outcome.ignored, outcome.approvals) == ("pending", 6, ())


def test_tally_is_judges_count_without_the_reasons() -> None:
    gate = two_of_three()
    decisions = [(signed("ann"), gate.digest), (signed("cy"), gate.digest)]
    assert tally(gate, decisions, **CALL) == judge(gate, decisions, **CALL)[0]
    assert tally(gate, decisions, **CALL).to_json() == {
        "outcome": "approved",
        "need": 2,
        "approvals": ["ann", "cy"],
        "denials": [],
        "ignored": 0,
    }


def test_a_key_given_as_bytes_base64_or_key_object_is_one_policy() -> None:
    forms = [
        raw("ann"),
        base64.b64encode(raw("ann")).decode("ascii"),
        KEYS["ann"].public_key(),
    ]
    digests = {ApprovalPolicy(approvers={"ann": key}).digest for key in forms}
    assert len(digests) == 1
    assert ApprovalPolicy(approvers={"ann": raw("ann")}).signed
    assert not single_approval().signed


def test_a_policy_copies_its_approvers_so_a_later_change_cannot_loosen_it() -> None:
    approvers: dict[str, Any] = {"ann": raw("ann"), "bob": raw("bob")}
    gate = ApprovalPolicy(need=2, approvers=approvers)
    before = gate.digest
    approvers["mallory"] = raw("cy")
    assert gate.public_key("mallory") is None
    assert gate.digest == before
    with pytest.raises(TypeError):
        gate.approvers["mallory"] = raw("cy")  # type: ignore[index]


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"need": 0}, "need must be between 1 and 1"),
        ({"need": 2}, "need must be between 1 and 1"),
        ({"need": True}, "need must be an integer"),
        ({"approvers": {"ann": b"short"}}, "must be an Ed25519 public key"),
        ({"approvers": {"ann": "not base64!"}}, "is not base64"),
        ({"approvers": {" ": b"\0" * 32}}, "non-empty strings"),
        ({"approvers": ["ann"]}, "must map approver ids"),
    ],
)
def test_a_malformed_policy_is_a_config_error(options: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        ApprovalPolicy(**options)


def test_two_approvers_sharing_one_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'ann' and 'bob' share one key"):
        ApprovalPolicy(approvers={"ann": raw("ann"), "bob": raw("ann")})


def test_policies_and_decisions_survive_their_json_round_trip() -> None:
    gate = two_of_three()
    again = ApprovalPolicy.from_json(gate.to_json())
    assert again.digest == gate.digest and again.need == 2
    decision = signed("bob", approve=False)
    assert Decision.from_json(decision.to_json()) == decision
    assert Decision.from_json(Decision("ann", True).to_json()) == Decision("ann", True)
    with pytest.raises(ConfigError):
        ApprovalPolicy.from_json(["need", 1])  # type: ignore[arg-type]
