"""Approval policies: who must say yes before a gated tool call runs (1-of-1, or signed m-of-n)."""

from __future__ import annotations

import base64
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from runtime.errors import ConfigError

__all__ = ["ApprovalPolicy", "single_approval"]


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """A gate on a tool: the call waits until ``need`` approvals are recorded, or a denial.

    With ``approvers`` empty, any one named person decides (``single_approval()``). With
    approvers, each decision must be signed by an approver's Ed25519 key over the decision bytes
    (see ``docs/human-in-the-loop.md``), and ``need`` distinct approvers must approve.
    Keys are given as 32 raw bytes, their base64 text, or ``Ed25519PublicKey`` objects.
    """

    need: int = 1
    approvers: Mapping[str, bytes] = field(default_factory=dict)

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
        raw = self.approvers.get(approver)
        return Ed25519PublicKey.from_public_bytes(raw) if raw is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "need": self.need,
            "approvers": {
                a: base64.b64encode(k).decode("ascii") for a, k in sorted(self.approvers.items())
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
