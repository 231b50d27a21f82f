"""What a person or a reconciler says about a call, and the rules it is held to.

``Resolution`` (what happened to a halted call), ``Decided`` (what one approval decision did),
the result payload a resolution journals, and the checks ``Journal.resolve``, ``decide`` and
``answer`` apply before they write: pure, over a folded ``RunState``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from runtime import records as R
from runtime.approval import ApprovalPolicy, Tally, judge
from runtime.errors import ConfigError, ConflictError
from runtime.journal.codec import unstorable
from runtime.state import CallState, RunState

__all__ = [
    "Decided",
    "Resolution",
    "already_so",
    "call_of",
    "check_storable",
    "ended",
    "judged",
    "resolution_payload",
]


class Decided(NamedTuple):
    """What recording one approval decision did."""

    counted: bool
    """Whether the decision counts toward the gate."""
    tally: Tally
    """The gate's tally now."""
    reason: str | None
    """Why it did not count (``None`` when it did)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a reconciler or a person says happened to a halted call."""

    outcome: Literal["value", "error", "not_executed"]
    value: Any = None
    error: str | None = None

    @classmethod
    def succeeded(cls, value: Any) -> Resolution:
        """It acted; ``value`` is the result the model will see."""
        return cls("value", value=value)

    @classmethod
    def failed(cls, error: str) -> Resolution:
        """It did not succeed; the model sees ``error``."""
        if not isinstance(error, str) or not error:
            raise ConfigError("a failed resolution needs an error text")
        return cls("error", error=error)

    @classmethod
    def not_executed(cls) -> Resolution:
        """It never acted; the call may be attempted again."""
        return cls("not_executed")

    def same_as(self, payload: dict[str, Any]) -> bool:
        if payload.get("outcome") != self.outcome:
            return False
        if self.outcome == "value":
            return _same_json(payload.get("value"), self.value)
        if self.outcome == "error":
            return bool((payload.get("error") or {}).get("message") == self.error)
        return True


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1.0`` nor ``1`` is ``1.0`` (Python says both are),
    since the model would be told something else."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return bool(a == b)


def already_so(state: RunState, call: CallState, resolution: Resolution) -> bool:
    """True if ``resolution`` is what the journal already says of ``call`` (recording it again
    changes nothing); ``ConflictError`` if the journal says otherwise, ``ConfigError`` if the
    call is not halted. False: the resolution may be recorded."""
    k = call.attempt
    last = call.last_resolution
    if last is not None and resolution.same_as(last.payload):
        resolved_attempt = last.payload.get("attempt")
        if (resolved_attempt == k and call.result is last) or (
            resolution.outcome == "not_executed"
            and resolved_attempt == k - 1
            and call.marker is None
        ):
            return True
    if call.result is not None:
        how = "was resolved" if call.result.payload.get("resolved") else "has a result"
        raise ConflictError(
            f"call {call.call.id!r} of run {state.run_id!r} {how} already "
            f"({call.result.payload.get('outcome')}); a different resolution is refused",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    if not call.unknown_outcome:
        if last is not None and last.payload.get("attempt") == k - 1 and call.marker is None:
            raise ConflictError(
                f"call {call.call.id!r} of run {state.run_id!r} was resolved as not executed "
                "already; a different resolution is refused",
                run_id=state.run_id,
                call_id=call.call.id,
            )
        raise ConfigError(
            f"call {call.call.id!r} of run {state.run_id!r} is not halted (no attempt without a "
            "result); only a halted call can be resolved",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    return False


def resolution_payload(
    call: CallState, resolution: Resolution, *, by: str | None, evidence: str | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "call_id": call.call.id,
        "attempt": call.attempt,
        "tool": call.call.name,
        "safety": (call.marker.payload.get("safety") if call.marker else None),
        "outcome": resolution.outcome,
        "resolved": {"by": by, "evidence": evidence},
    }
    if resolution.outcome == "value":
        payload["value"] = resolution.value
    elif resolution.outcome == "error":
        payload["error"] = R.error_payload("resolved_failed", resolution.error or "")
    return payload


def ended(state: RunState) -> ConflictError:
    return ConflictError(
        f"run {state.run_id!r} has ended; nothing more is recorded for it", run_id=state.run_id
    )


def check_storable(payload: Any, what: str) -> None:
    """Refuse operator input the journal cannot store and read back identically."""
    problem = unstorable(payload, name=what)
    if problem is not None:
        raise ConfigError(f"cannot journal this {what}: {problem}")


def call_of(state: RunState, call_id: str) -> CallState:
    call = state.calls.get(call_id)
    if call is None:
        raise ConfigError(f"run {state.run_id!r} has no call {call_id!r}", run_id=state.run_id)
    return call


def judged(
    call: CallState, policy: ApprovalPolicy, run_id: str, seq: int
) -> tuple[Tally, str | None]:
    """The gate's tally now, and why the decision recorded at ``seq`` did not count (or None).

    A terminal tally journaled by a drive (before the tool ran) is the gate's outcome; a
    decision recorded after it cannot count.
    """
    ordered = sorted(call.decisions, key=lambda r: r.seq)
    count, reasons = judge(
        policy,
        call.decisions_made(),
        run_id=run_id,
        call_id=call.call.id,
        tool=call.call.name,
        arguments=call.call.arguments,
    )
    reason = next((why for r, why in zip(ordered, reasons, strict=True) if r.seq == seq), None)
    recorded = call.tallies.get(policy.digest)
    if recorded is not None:
        t = recorded.payload["tally"]
        count = Tally(
            t["outcome"], t["need"], tuple(t["approvals"]), tuple(t["denials"]), t["ignored"]
        )
        if reason is None and recorded.seq < seq:
            reason = f"the gate was already decided: {t['outcome']}"
    return count, reason
