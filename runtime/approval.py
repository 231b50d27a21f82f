"""Approval policies: who must say yes before a gated tool call runs (1-of-1, or signed m-of-n)."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from runtime.errors import ConfigError

if TYPE_CHECKING:  # cryptography is imported only where a signed policy needs it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "DECISION_TAG",
    "ApprovalPolicy",
    "Decision",
    "Tally",
    "arguments_digest",
    "canonical_json",
    "decision_bytes",
    "judge",
    "sign_decision",
    "single_approval",
    "tally",
]

DECISION_TAG = "bide/approval/v1"
"""The format tag that starts every signed decision's bytes."""


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """A gate on a tool: the call waits until ``need`` approvals are recorded, or a denial.

    With ``approvers`` empty, any one named person decides (``single_approval()``). With
    approvers, each decision must be signed by an approver's Ed25519 key over the decision bytes
    (see ``docs/human-in-the-loop.md``), and ``need`` distinct approvers must approve.
    Keys are given as 32 raw bytes, their base64 text, or ``Ed25519PublicKey`` objects.
    """

    need: int = 1
    approvers: Mapping[str, bytes | str | Ed25519PublicKey] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.need, bool) or not isinstance(self.need, int):
            raise ConfigError(f"approval policy: need must be an integer, not {self.need!r}")
        if not isinstance(self.approvers, Mapping):
            raise ConfigError("approval policy: approvers must map approver ids to public keys")
        keys: dict[str, bytes] = {}
        seen: dict[bytes, str] = {}
        for approver, key in self.approvers.items():
            if not isinstance(approver, str) or not approver.strip():
                raise ConfigError("approval policy: approver ids must be non-empty strings")
            raw = _raw_public_key(approver, key)
            if raw in seen:
                raise ConfigError(
                    f"approval policy: approvers {seen[raw]!r} and {approver!r} share one key"
                )
            seen[raw] = approver
            keys[approver] = raw
        # Frozen and copied: a caller mutating its dict later cannot loosen a gate.
        object.__setattr__(self, "approvers", types.MappingProxyType(keys))
        n = len(keys) or 1
        if not 1 <= self.need <= n:
            raise ConfigError(f"approval policy: need must be between 1 and {n}, not {self.need}")

    @property
    def signed(self) -> bool:
        """True when decisions must be signed by named approvers (m-of-n)."""
        return bool(self.approvers)

    def public_key(self, approver: str) -> Ed25519PublicKey | None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        raw = self._raw_keys().get(approver)
        return Ed25519PublicKey.from_public_bytes(raw) if raw is not None else None

    def _raw_keys(self) -> Mapping[str, bytes]:
        # __post_init__ replaced whatever key forms were given by their 32 raw bytes.
        return cast(Mapping[str, bytes], self.approvers)

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical policy: a decision counts only under the policy it was for."""
        return hashlib.sha256(canonical_json(self.to_json())).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {
            "need": self.need,
            "approvers": {
                a: base64.b64encode(k).decode("ascii") for a, k in sorted(self._raw_keys().items())
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalPolicy:
        if not isinstance(data, Mapping):
            raise ConfigError("approval policy must be an object with 'need' and 'approvers'")
        return cls(need=data.get("need", 1), approvers=dict(data.get("approvers") or {}))


def single_approval() -> ApprovalPolicy:
    """A gate that one decision opens or closes: ``approve`` or ``deny``, with who decided."""
    return ApprovalPolicy(need=1)


def _raw_public_key(approver: str, key: object) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    if isinstance(key, Ed25519PublicKey):
        return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    if isinstance(key, str):
        try:
            key = base64.b64decode(key, validate=True)
        except ValueError as exc:
            raise ConfigError(f"approval policy: key of {approver!r} is not base64") from exc
    if isinstance(key, bytes | bytearray) and len(key) == 32:
        try:
            Ed25519PublicKey.from_public_bytes(bytes(key))
        except ValueError as exc:
            raise ConfigError(f"approval policy: key of {approver!r} is invalid") from exc
        return bytes(key)
    raise ConfigError(
        f"approval policy: key of {approver!r} must be an Ed25519 public key (32 raw bytes)"
    )


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of a value: sorted keys, no whitespace, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def arguments_digest(arguments: Any) -> str:
    """Hex SHA-256 of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(arguments)).hexdigest()


def decision_bytes(
    *, run_id: str, call_id: str, tool: str, arguments: Any, approver: str, approve: bool
) -> bytes:
    """The exact bytes an approver signs: each field as a 4-byte big-endian length and UTF-8.

    Fields, in order: the tag ``bide/approval/v1``, run id, call id, tool name, the hex SHA-256 of
    the canonical JSON arguments, approver id, and ``approve`` or ``deny``.
    """
    fields = (
        DECISION_TAG,
        run_id,
        call_id,
        tool,
        arguments_digest(arguments),
        approver,
        "approve" if approve else "deny",
    )
    out = bytearray()
    for text in fields:
        raw = text.encode("utf-8")
        out += struct.pack(">I", len(raw)) + raw
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Decision:
    """One approver's decision on one call, as submitted (signed for m-of-n policies)."""

    approver: str
    approve: bool
    signature: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "approver": self.approver,
            "approve": self.approve,
            "signature": (
                base64.b64encode(self.signature).decode("ascii") if self.signature else None
            ),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        signature = data.get("signature")
        return cls(
            approver=str(data.get("approver", "")),
            approve=bool(data.get("approve")),
            signature=base64.b64decode(signature) if signature else None,
        )


def sign_decision(
    key: Ed25519PrivateKey,
    *,
    run_id: str,
    call_id: str,
    tool: str,
    arguments: Any,
    approver: str,
    approve: bool = True,
) -> Decision:
    """Sign a decision with an approver's private key (what ``approve --key`` does)."""
    message = decision_bytes(
        run_id=run_id,
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        approver=approver,
        approve=approve,
    )
    return Decision(approver, approve, key.sign(message))


@dataclass(frozen=True, slots=True)
class Tally:
    """The count of a gate's valid decisions and what it concludes."""

    outcome: Literal["approved", "denied", "pending"]
    need: int
    approvals: tuple[str, ...]
    denials: tuple[str, ...]
    ignored: int
    """Decisions journaled but not counted: bad signature, unknown approver, a repeat, another
    policy."""

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "need": self.need,
            "approvals": list(self.approvals),
            "denials": list(self.denials),
            "ignored": self.ignored,
        }


def verify(
    policy: ApprovalPolicy,
    decision: Decision,
    *,
    run_id: str,
    call_id: str,
    tool: str,
    arguments: Any,
) -> bool:
    """Whether the decision may be counted under ``policy`` for this exact call."""
    if not decision.approver:
        return False
    if not policy.signed:
        return True
    key = policy.public_key(decision.approver)
    if key is None or decision.signature is None:
        return False
    message = decision_bytes(
        run_id=run_id,
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        approver=decision.approver,
        approve=decision.approve,
    )
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(decision.signature, message)
    except InvalidSignature:
        return False
    return True


def tally(
    policy: ApprovalPolicy,
    decisions: Iterable[tuple[Decision, str]],
    *,
    run_id: str,
    call_id: str,
    tool: str,
    arguments: Any,
) -> Tally:
    """Count decisions, in journal order, each with the policy digest it was made under.

    Each approver's first valid decision counts, until the gate is decided: approved at
    ``need`` approvals, denied once ``need`` can no longer be reached (for a 1-of-1 gate, by the
    first decision). A decided gate stays decided: later decisions are not counted.
    """
    return judge(policy, decisions, run_id=run_id, call_id=call_id, tool=tool, arguments=arguments)[
        0
    ]


def judge(
    policy: ApprovalPolicy,
    decisions: Iterable[tuple[Decision, str]],
    *,
    run_id: str,
    call_id: str,
    tool: str,
    arguments: Any,
) -> tuple[Tally, tuple[str | None, ...]]:
    """The tally, and for each decision in order ``None`` if it counted, else why it did not."""
    counted: dict[str, bool] = {}
    reasons: list[str | None] = []
    outcome: Literal["approved", "denied", "pending"] = "pending"
    voters = len(policy.approvers) if policy.signed else 1
    for decision, digest in decisions:
        reason = None
        if outcome != "pending":
            reason = f"the gate was already decided: {_decided_by(outcome, counted)}"
        elif digest != policy.digest:
            reason = "made under another approval policy"
        elif not decision.approver:
            reason = "no approver named"
        elif policy.signed and policy.public_key(decision.approver) is None:
            reason = f"{decision.approver!r} is not an approver of this gate"
        elif decision.approver in counted:
            reason = f"{decision.approver} decided already"
        elif not verify(
            policy, decision, run_id=run_id, call_id=call_id, tool=tool, arguments=arguments
        ):
            reason = "bad signature (not this call, these arguments or this approver's key)"
        reasons.append(reason)
        if reason is not None:
            continue
        counted[decision.approver] = decision.approve
        approvals = sum(counted.values())
        if approvals >= policy.need:
            outcome = "approved"
        elif approvals + max(voters - len(counted), 0) < policy.need:
            outcome = "denied"
    approved = tuple(a for a, ok in counted.items() if ok)
    denied = tuple(a for a, ok in counted.items() if not ok)
    ignored = sum(r is not None for r in reasons)
    return Tally(outcome, policy.need, approved, denied, ignored), tuple(reasons)


def _decided_by(outcome: str, counted: Mapping[str, bool]) -> str:
    who = [a for a, ok in counted.items() if ok is (outcome == "approved")]
    return f"{outcome} by {', '.join(who)}" if who else outcome
