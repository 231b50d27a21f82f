"""Where a run stands: its status for every view, and the calls it is stopped on.

Pure (no I/O): ``list``, ``show``, the console and the worker read ``status_of``, ``halted_on``,
``in_flight_on`` and ``waiting_on`` from a folded ``RunState``; liveness comes in as the lease of
a live owner (``driving``), judged by the caller.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime import records as R
from runtime.approval import ApprovalPolicy, judge, tally
from runtime.errors import ConfigError
from runtime.state import CallState, RunState

if TYPE_CHECKING:
    from runtime.ownership import Lease

__all__ = [
    "NEVER_STARTED",
    "Stop",
    "halted_on",
    "in_flight_on",
    "reconciling_text",
    "status_of",
    "stopped_on",
    "uncounted",
    "waiting_on",
]

NEVER_STARTED = "never-started"
"""The status of a run whose process stopped after its header and before its start record:
nothing of it ran, and only ``run`` with its input starts it (``resume`` cannot)."""


@dataclass(frozen=True, slots=True)
class Stop:
    """A call the run is stopped on: ``halted`` (outcome unknown), ``approval``, ``input``,
    ``timer`` (``ToolContext.sleep``) or ``signal`` (``ToolContext.receive``)."""

    kind: str
    call_id: str
    tool: str
    arguments: Any
    safety: str | None = None
    attempt: int | None = None
    attempted_at_ms: int | None = None
    key: str | None = None
    prompt: str | None = None
    tally: Mapping[str, Any] | None = None
    """For an approval: the running tally (``outcome``, ``need``, ``approvals``, ``denials``)."""
    cause: str | None = None
    """For a halt: why the drive that made the attempt halted on it, as it journaled."""
    reconciling: Mapping[str, Any] | None = None
    """For a halt whose tool has a reconciler: its last inconclusive try (``reconciler``,
    ``said``, ``detail``, ``waiting``, ``next_try_ms``)."""
    due_at: str | None = None
    """For a timer, or a receive with a timeout: when it ends by itself, on the wall clock (ISO
    8601 UTC, to read; the journal's clock decides)."""
    signal: str | None = None
    """For a receive: the name of the signal it waits for."""
    arrived: bool | None = None
    """For a receive: a signal of that name is in the mailbox, for its next drive to give."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
        }
        for name in (
            "safety",
            "attempt",
            "attempted_at_ms",
            "key",
            "prompt",
            "tally",
            "cause",
            "reconciling",
            "due_at",
            "signal",
            "arrived",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def brief(self) -> str:
        """``halted c3 charge_card``, ``approval c3 charge_card``, ``input c3 ask (key)``."""
        text = f"{self.kind} {self.call_id} {self.tool}"
        if self.key is not None:
            return f"{text} ({self.key})"
        if self.tally is not None:
            return f"{text} ({len(self.tally.get('approvals', ()))}/{self.tally.get('need')})"
        if self.reconciling is not None:
            return f"{text} (reconciling)"
        if self.signal is not None:
            until = f", until {self.due_at}" if self.due_at is not None else ""
            return f"{text} ({self.signal}{until})"
        if self.due_at is not None:
            return f"{text} (until {self.due_at})"
        return text


def stopped_on(state: RunState) -> Mapping[str, Any] | None:
    """Why the last drive stopped short of an end, while that still holds (the run is
    ``orphaned``): ``reason``, ``message`` and ``remedy`` as the drive journaled them."""
    stop = state.stop if state.end is None and state.cancel is None else None
    if stop is None or not isinstance(stop.payload, Mapping):
        return None
    return {k: stop.payload.get(k) for k in ("reason", "message", "remedy")}


def status_of(state: RunState, driving: Lease | None = None, *, submitted: bool = False) -> str:
    """The status every view shows: the records' status with liveness
    (``RunState.live_status``: ``driving`` is the lease of a live owner, if one drives the run),
    or ``never-started`` for a run that has its header and no start record (and no cancel
    request or end)."""
    if state.start is None and state.end is None and state.cancel is None:
        return NEVER_STARTED
    return state.live_status(driving, submitted=submitted)


def halted_on(state: RunState, driving: Lease | None = None) -> tuple[Stop, ...]:
    """The calls whose side effect was attempted and has no result: each may have acted.

    Whatever the run's status: a cancelled or ended run keeps its unresolved calls here until
    a resolution says what they did. A call in flight under ``driving`` is not halted, nor, in a
    run that goes on, one whose latest step journaled a handle (``CallState.resumable``).
    """
    running = {c.call.id for c in state.in_flight(driving)}
    live = state.end is None and state.cancel is None
    # A call that journaled a handle to its effect is continued by the next drive, not halted.
    return _attempted(
        state, "halted", lambda c: c.call.id not in running and not (live and c.resumable)
    )


def in_flight_on(state: RunState, driving: Lease | None) -> tuple[Stop, ...]:
    """The side effects running now: attempted under the lease of the live owner ``driving``."""
    running = {c.call.id for c in state.in_flight(driving)}
    return _attempted(state, "in flight", lambda c: c.call.id in running)


def _attempted(state: RunState, kind: str, keep: Callable[[CallState], bool]) -> tuple[Stop, ...]:
    stops = []
    for c in state.unresolved_calls():
        if not keep(c):
            continue
        marker = c.marker
        stops.append(
            Stop(
                kind,
                c.call.id,
                c.call.name,
                c.call.arguments,
                safety=marker.payload.get("safety") if marker is not None else None,
                attempt=c.attempt,
                attempted_at_ms=marker.created_ms if marker is not None else None,
                cause=c.halt_cause,
                reconciling=_reconciling(c),
            )
        )
    return tuple(stops)


def _reconciling(call: CallState) -> Mapping[str, Any] | None:
    last = call.last_reconcile
    if last is None or not isinstance(last.payload, Mapping):
        return None
    keys = ("reconciler", "said", "detail", "waiting", "next_try_ms")
    tried = {k: last.payload.get(k) for k in keys}
    # Shown on the wall clock: the try's time plus its wait (``next_try_ms`` itself is on the
    # journal's clock, which on SQLite counts from boot).
    wait = last.payload.get("retry_in_ms")
    if isinstance(wait, int) and not isinstance(wait, bool):
        tried["next_try_ms"] = last.created_ms + wait
    return tried


def reconciling_text(tried: Mapping[str, Any], now_ms: int) -> str:
    """``reconciling (next try in 30 s): find_charge said unknown: provider timeout``."""
    due = tried.get("next_try_ms")
    when = ""
    if isinstance(due, int):
        left = max(0, round((due - now_ms) / 1000))
        when = f" (next try in {left} s)" if left else " (next try due now)"
    text = f"reconciling{when}: {tried.get('reconciler')} said {tried.get('said')}"
    text += f": {tried.get('detail')}"
    if tried.get("waiting"):
        text += f" ({tried.get('waiting')})"
    return text


def waiting_on(state: RunState) -> tuple[Stop, ...]:
    """The calls waiting for a person: an unanswered question first, else an approval.

    None for a cancelled or ended run: nothing waits there any more (its next drive ends it).
    """
    if state.end is not None or state.cancel is not None:
        return ()
    stops = []
    for c in state.waiting_calls():
        questions = [k for k in c.interrupts if k not in c.answers]
        for key in questions:
            prompt = c.interrupts[key].payload.get("prompt")
            stops.append(
                Stop(
                    "input",
                    c.call.id,
                    c.call.name,
                    c.call.arguments,
                    key=key,
                    prompt=prompt if isinstance(prompt, str) else None,
                )
            )
        if questions:
            continue
        wait = _open_wait(c)
        if wait is not None:
            at = wait.get("at_ms")
            receives = wait.get("what") == "receive"
            stops.append(
                Stop(
                    "signal" if receives else "timer",
                    c.call.id,
                    c.call.name,
                    c.call.arguments,
                    due_at=wall_iso(at) if isinstance(at, int) else None,
                    signal=str(wait.get("name")) if receives else None,
                    arrived=_arrived(state, str(wait.get("name"))) if receives else None,
                )
            )
            continue
        stops.append(
            Stop("approval", c.call.id, c.call.name, c.call.arguments, tally=_tally(state, c))
        )
    return tuple(stops)


def _open_wait(call: CallState) -> Mapping[str, Any] | None:
    """The payload of the call's latest wait while it lasts (``RunState.status``'s rule)."""
    if not call.waits:
        return None
    n = max(call.waits)
    wait = call.waits[n].payload
    if wait.get("what") == "sleep" or n not in call.received:
        return wait if isinstance(wait, Mapping) else None
    return None


def _arrived(state: RunState, name: str) -> bool:
    """Whether a signal ``name`` that no receive was given is in the run's mailbox (read from
    the records: a view folds them all)."""
    given = {r.payload.get("signal") for c in state.calls.values() for r in c.received.values()}
    prefix = R.signal_prefix(name)
    return any(r.key.startswith(prefix) and r.key not in given for r in state.records)


def wall_iso(ms: int) -> str:
    """A wall-clock time in ms as ISO 8601 UTC, to the second."""
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def uncounted(state: RunState, call: CallState) -> dict[int, str]:
    """Why each decision on ``call`` that did not count was left out, by its record's seq.

    Judged as the gate judges them (``approval.judge``), in journal order, under the policy the
    turn recorded for the call.
    """
    records = sorted(call.decisions, key=lambda r: r.seq)
    policy = _recorded_policy(call)
    if policy is None:
        why = (
            "the call has no approval gate"
            if not isinstance(call.plan.get("approval"), Mapping)
            else "the gate's recorded policy cannot be read"
        )
        return {r.seq: why for r in records}
    _, reasons = judge(policy, call.decisions_made(), **_subject(state, call))
    return {r.seq: why for r, why in zip(records, reasons, strict=True) if why is not None}


def _tally(state: RunState, call: CallState) -> Mapping[str, Any] | None:
    """The gate's running tally, under the policy the turn recorded for the call."""
    policy = _recorded_policy(call)
    if policy is None:
        return None
    return tally(policy, call.decisions_made(), **_subject(state, call)).to_json()


def _recorded_policy(call: CallState) -> ApprovalPolicy | None:
    """The approval policy the turn journaled for ``call``; None if none, or unreadable."""
    policy_json = call.plan.get("approval")
    if not isinstance(policy_json, Mapping):
        return None
    try:
        return ApprovalPolicy.from_json(policy_json)
    except ConfigError:
        return None


def _subject(state: RunState, call: CallState) -> dict[str, Any]:
    """What a decision on ``call`` is judged against (``approval.judge`` and ``tally``)."""
    return {
        "run_id": state.run_id,
        "call_id": call.call.id,
        "tool": call.call.name,
        "arguments": call.call.arguments,
    }
