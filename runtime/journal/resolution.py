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
from runtime.jsontext import unstorable
from runtime.state import CallState, RunState

__all__ = [
    "Decided",
    "Resolution",
    "already_so",
    "call_of",
    "check_storable",
    "ended",
    "judged",
    "judged_attempt",
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


def judged_attempt(state: RunState, call: CallState, attempt: int | None) -> int:
    """The attempt a resolution judges: ``attempt`` when it is named; unnamed, the call's only
    attempt. A call that has had several attempts needs it named (``ConflictError`` naming the
    current one): "not executed" said again after a new attempt started would be taken for a
    verdict on an attempt nobody looked at."""
    if attempt is None:
        made = max(call.markers, default=1)
        if made > 1:
            raise ConflictError(
                f"call {call.call.id!r} of run {state.run_id!r} has had {made} attempts and is "
                f"on attempt {call.attempt}: name the attempt this resolution judged "
                f"(--attempt {call.attempt} if it is the current one)",
                run_id=state.run_id,
                call_id=call.call.id,
            )
        return 1
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ConfigError(f"an attempt is a positive integer (1 for the first), not {attempt!r}")
    return attempt


def already_so(state: RunState, call: CallState, resolution: Resolution, attempt: int) -> bool:
    """True if ``resolution`` of ``attempt`` is what the journal already says of ``call``
    (recording it again changes nothing); False if it may be recorded: ``attempt`` is the
    call's current attempt, attempted and without a result. Otherwise refused:
    ``ConflictError`` if the journal says something else of that attempt or the call has moved
    on to another attempt (the message names the current one), ``ConfigError`` if the attempt
    was never made."""
    k, now = attempt, call.attempt
    ids = f"call {call.call.id!r} of run {state.run_id!r}"
    if k > now:
        raise ConfigError(
            f"{ids} has no attempt {k}: it is on attempt {now} ({_standing(call)})",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    if k == now and call.marker is None and call.result is None:
        raise ConfigError(
            f"{ids} is not halted (attempt {k} was not made); only a halted call can be resolved",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    if k < now:  # attempt k was resolved "not executed": the call moved on
        moved_on = call.marker is not None or call.result is not None
        if resolution.outcome == "not_executed" and not moved_on:
            return True
        why = (
            "a different resolution is refused"
            if resolution.outcome != "not_executed"
            else f"a resolution of attempt {k} is refused"
        )
        raise ConflictError(
            f"{ids}: attempt {k} was resolved as not executed already and the call is on "
            f"attempt {now} now ({_standing(call)}); {why}",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    result = call.result
    if result is not None:
        if result.payload.get("resolved") and resolution.same_as(result.payload):
            return True
        how = "was resolved" if result.payload.get("resolved") else "has a result"
        raise ConflictError(
            f"{ids} {how} already ({result.payload.get('outcome')}, attempt {k}); a different "
            "resolution is refused",
            run_id=state.run_id,
            call_id=call.call.id,
        )
    return False


def _standing(call: CallState) -> str:
    """Where the call's current attempt stands, for a refusal."""
    if call.result is not None:
        return f"which has a result ({call.result.payload.get('outcome')})"
    if call.marker is not None:
        return "which has no result"
    return "not attempted yet"


def resolution_payload(
    call: CallState,
    resolution: Resolution,
    *,
    attempt: int,
    by: str | None,
    evidence: str | None,
) -> dict[str, Any]:
    """The result record of ``resolution`` of ``call``'s attempt ``attempt``."""
    marker = call.markers.get(attempt)
    payload: dict[str, Any] = {
        "call_id": call.call.id,
        "attempt": attempt,
        "tool": call.call.name,
        "safety": (marker.payload.get("safety") if marker else None),
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
