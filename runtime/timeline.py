"""A run's timeline, derived from its records alone: what happened, in commit order, in words.

Pure (no I/O): ``python -m runtime show`` prints ``render(timeline(state))`` and ``--json`` prints
``Timeline.to_json()``; ``list`` uses ``status_of``, ``halted_on`` and ``waiting_on`` for each run.
``read`` folds a run's records without letting one malformed record hide the others' runs.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from runtime import records as R
from runtime.approval import ApprovalPolicy, judge, tally
from runtime.errors import ConfigError, ProtocolError
from runtime.messages import AssistantTurn, Usage
from runtime.records import Record
from runtime.state import CallState, RunState

if TYPE_CHECKING:
    from runtime.ownership import Lease

__all__ = [
    "NEVER_STARTED",
    "UNREADABLE",
    "Event",
    "Stop",
    "Timeline",
    "Unreadable",
    "clip",
    "halted_on",
    "in_flight_on",
    "printable",
    "read",
    "reconciling_text",
    "render",
    "status_of",
    "stopped_on",
    "timeline",
    "uncounted",
    "waiting_on",
]

NEVER_STARTED = "never-started"
"""The status of a run whose process stopped after its header and before its start record:
nothing of it ran, and only ``run`` with its input starts it (``resume`` cannot)."""
UNREADABLE = "unreadable"
"""What ``list`` shows for a run one of whose records cannot be decoded or folded."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Event:
    """One record of the run, told: a label, a headline and detail lines."""

    seq: int
    at_ms: int
    kind: str
    key: str
    call_id: str | None
    label: str
    lines: tuple[str, ...]
    payload: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at_ms": self.at_ms,
            "kind": self.kind,
            "key": self.key,
            "call_id": self.call_id,
            "summary": self.lines[0],
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class Stop:
    """A call the run is stopped on: ``halted`` (outcome unknown), ``approval`` or ``input``."""

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
        return text


@dataclass(frozen=True, slots=True)
class Timeline:
    """Everything ``show`` tells about a run."""

    run_id: str
    status: str
    agent: str | None
    spec: str | None
    input: Any
    started_ms: int | None
    turns: int
    usage: Usage
    output: str | None
    error: str | None
    halted: tuple[Stop, ...]
    waiting: tuple[Stop, ...]
    events: tuple[Event, ...]
    stopped: Mapping[str, Any] | None = None
    """For an ``orphaned`` run: the journaled stop (``reason``, ``message``, ``remedy``)."""
    anomalies: tuple[str, ...] = ()
    """What the records should never hold (``RunState.anomalies``): "may have acted twice"."""
    in_flight: tuple[Stop, ...] = ()
    """Side effects running now, under the lease of the live owner driving the run."""
    lease: Lease | None = None
    """Who drives the run, or last did (``lease.live``: still holds it by the store's clock)."""
    driven: bool = False
    """Whether a live owner drives the run now."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "agent": self.agent,
            "spec": self.spec,
            "input": self.input,
            "started_ms": self.started_ms,
            "turns": self.turns,
            "usage": self.usage.to_json(),
            "output": self.output,
            "error": self.error,
            "halted": [s.to_json() for s in self.halted],
            "waiting": [s.to_json() for s in self.waiting],
            "events": [e.to_json() for e in self.events],
            "stopped": dict(self.stopped) if self.stopped is not None else None,
            "anomalies": list(self.anomalies),
            "in_flight": [s.to_json() for s in self.in_flight],
            "lease": self.lease.to_json() if self.lease is not None else None,
            "driven": self.driven,
        }


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A run that cannot be told: one of its records cannot be decoded or folded.

    ``reason`` names the record (its key and seq) and what is wrong with it.
    """

    run_id: str
    reason: str


_MALFORMED = (ProtocolError, LookupError, TypeError, ValueError, AttributeError)
"""What folding or telling a record of the wrong shape raises (valid JSON, not bide's record)."""


def read(run_id: str, records: Iterable[Record], tell: Callable[[RunState], _T]) -> _T | Unreadable:
    """Fold ``records`` and ``tell`` the run (``timeline``, or what ``list`` needs), or say which
    record makes that impossible: one malformed record costs its own run, never a listing."""
    ordered = sorted(records, key=lambda r: r.seq)
    try:
        return tell(RunState.fold(run_id, ordered))
    except _MALFORMED as exc:
        failure: BaseException = exc
    # Only for a run that failed: find the first record it cannot be read past.
    state = RunState(run_id)
    for record in ordered:
        try:
            state.add(record)
        except _MALFORMED as exc:
            return _unreadable(run_id, record, exc)
    # Every record folds, telling fails: bisect for the shortest prefix that cannot be told.
    told, fails = 0, len(ordered)
    while fails - told > 1:
        middle = (told + fails) // 2
        try:
            tell(RunState.fold(run_id, ordered[:middle]))
            told = middle
        except _MALFORMED as exc:
            fails, failure = middle, exc
    if not ordered:
        return Unreadable(run_id, f"run {run_id!r} cannot be read: {_why(failure)}")
    return _unreadable(run_id, ordered[fails - 1], failure)


def _unreadable(run_id: str, record: Record, exc: BaseException) -> Unreadable:
    return Unreadable(
        run_id,
        f"record {record.key!r} of run {run_id!r} cannot be read (seq {record.seq}): {_why(exc)}",
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, ProtocolError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def timeline(
    state: RunState,
    lease: Lease | None = None,
    *,
    driven: bool = False,
    submitted: bool = False,
) -> Timeline:
    """Tell the run folded in ``state``, record by record. ``lease`` is the run's lease, and
    ``driven`` whether a live owner holds it (``ownership.is_alive``): the caller judges, so
    that telling stays pure."""
    driving = lease if driven else None
    start = state.start or {}
    end = state.end.payload if state.end is not None else {}
    records = sorted(state.records, key=lambda r: r.seq)
    return Timeline(
        run_id=state.run_id,
        status=status_of(state, driving, submitted=submitted),
        agent=start.get("agent"),
        spec=start.get("spec"),
        input=start.get("input"),
        started_ms=records[0].created_ms if records else None,
        turns=len(state.turns),
        usage=state.usage,
        output=end.get("output"),
        error=end.get("error"),
        halted=halted_on(state, driving),
        waiting=waiting_on(state),
        events=tuple(e for r in records if (e := _event(state, r)) is not None),
        stopped=stopped_on(state),
        anomalies=tuple(state.anomalies()),
        in_flight=in_flight_on(state, driving),
        lease=lease,
        driven=driving is not None,
    )


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
    a resolution says what they did. A call in flight under ``driving`` is not halted.
    """
    running = {c.call.id for c in state.in_flight(driving)}
    return _attempted(state, "halted", lambda c: c.call.id not in running)


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
    return {k: last.payload.get(k) for k in keys}


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
        if not questions:
            stops.append(
                Stop("approval", c.call.id, c.call.name, c.call.arguments, tally=_tally(state, c))
            )
    return tuple(stops)


def render(tl: Timeline) -> list[str]:
    """The timeline as text lines: a header, one block per record, then where the run stands."""
    head = f"run {tl.run_id}: {tl.status}"
    facts = [f"agent {tl.agent}" if tl.agent else "agent ?"]
    if tl.spec:
        facts.append(f"spec {tl.spec}")
    facts.append(f"{tl.turns} turn{'s' if tl.turns != 1 else ''}")
    if tl.usage.input_tokens or tl.usage.output_tokens:
        facts.append(f"tokens {tl.usage.input_tokens} in / {tl.usage.output_tokens} out")
    lines = [head, "  " + ", ".join(facts), ""]
    origin = tl.started_ms or 0
    for event in tl.events:
        stamp = _offset(event.at_ms - origin)
        lines.append(f"{stamp:>9}  {event.label:<9} {event.lines[0]}")
        lines.extend(f"{'':>9}  {'':<9} {line}" for line in event.lines[1:])
    now = _now(tl, origin)
    if now:
        if tl.events:
            lines.append("")
        lines.extend(now)
    # Run ids, tool names and call ids come from callers and the model: escape them all.
    return [printable(line) for line in lines]


def clip(value: Any, limit: int = 120) -> str:
    """A value on one line, as JSON, at most ``limit`` characters, with control characters
    escaped (a tool's result or a model's text must not drive the operator's terminal)."""
    try:
        text = printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        text = printable(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional controls: they reorder what a terminal shows (a tool name that reads backwards,
a call id that hides its tail), so they are escaped like control characters."""


def printable(text: str) -> str:
    """``text`` with control characters escaped as ``\\xNN`` and bidirectional controls as
    ``\\uNNNN``: safe to print to a terminal, shown in the order it is stored."""
    return "".join(_escaped(c) for c in text)


def _escaped(c: str) -> str:
    if c in _BIDI:
        return f"\\u{ord(c):04x}"
    if unicodedata.category(c) == "Cc":
        return f"\\x{ord(c):02x}"
    return c


# --- one record, told -------------------------------------------------------------------------


def _event(state: RunState, record: Record) -> Event | None:
    kind, p = record.kind, record.payload
    if kind == "header":
        return None
    call_id = p.get("call_id") if isinstance(p, Mapping) else None
    if not isinstance(call_id, str):
        call_id = None
    label, lines = _tell(state, record)
    return Event(record.seq, record.created_ms, kind, record.key, call_id, label, lines, p)


def _tell(state: RunState, record: Record) -> tuple[str, tuple[str, ...]]:
    kind, p = record.kind, record.payload
    if not isinstance(p, Mapping):
        return kind, (f"{record.key} {clip(p)}",)
    if kind == R.START:
        spec = f" (spec {p['spec']})" if p.get("spec") else ""
        return "start", (f"input {clip(p.get('input'))}", f"agent {p.get('agent')}{spec}")
    if kind == R.TURN:
        return f"turn {p.get('n')}", _tell_turn(p)
    if kind == R.ATTEMPT:
        return "attempt", (
            f"{_who(p)} [{p.get('safety')}] attempt {p.get('attempt')} marked: "
            "the call is about to leave the process",
        )
    if kind == R.RESULT:
        return _tell_result(state, p)
    if kind == R.LATE:
        return "late", (
            f"{_who(p)} attempt {p.get('attempt')} returned after it was resolved "
            f"not executed: {_outcome(p)}",
        )
    if kind == R.HALT:
        return "halt", (f"{_who_call(state, p)} attempt {p.get('attempt')}: {p.get('cause')}",)
    if kind == R.STOP:
        return "stop", (
            f"the drive stopped short of an end: {p.get('message')}",
            f"to continue: {p.get('remedy')}",
        )
    if kind == R.CANCEL:
        by = f" by {p['by']}" if p.get("by") else ""
        reason = f": {clip(p['reason'])}" if p.get("reason") else ""
        return "cancel", (f"cancel requested{by}{reason}",)
    if kind == R.END:
        status = p.get("status")
        if status == "completed":
            return "end", (f"completed: {clip(p.get('output'))}",)
        if status == "failed":
            return "end", (f"failed: {clip(p.get('error'))}",)
        return "end", (str(status),)
    if kind == R.INTERRUPT:
        return "question", (f"{_who_call(state, p)} asks {clip(p.get('prompt'))} ({p.get('key')})",)
    told = _tell_person(state, record)
    if told is not None:
        return told
    rest = {k: v for k, v in p.items() if k != "call_id"}
    subject = f"{_who_call(state, p)} " if "call_id" in p else ""
    return kind, (f"{subject}{clip(rest)}",)


def _tell_turn(p: Mapping[str, Any]) -> tuple[str, ...]:
    turn = AssistantTurn.from_json(p.get("turn") or {})
    plans = p.get("plan") or {}
    if not turn.tool_calls:
        return (f"answers {clip(turn.text)}",)
    n = len(turn.tool_calls)
    lines = [f"asks for {n} tool call{'s' if n != 1 else ''}"]
    if turn.text:
        lines.append(f"says {clip(turn.text)}")
    for call in turn.tool_calls:
        plan = plans.get(call.id) or {}
        if plan.get("unknown"):
            how = "unknown tool"
        else:
            how = str(plan.get("safety"))
            if plan.get("approval"):
                how += ", needs approval"
        lines.append(f"{call.id} {call.name} [{how}] {clip(call.arguments, 80)}")
    return tuple(lines)


def _tell_result(state: RunState, p: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    resolved = p.get("resolved")
    if not resolved:
        return "result", (f"{_who(p)} {_outcome(p)}",)
    said = {"value": "succeeded", "error": "failed", "not_executed": "not executed"}
    outcome = p.get("outcome")
    head = f"{_who(p)} attempt {p.get('attempt')}: {said.get(str(outcome), outcome)}"
    if outcome == "not_executed":
        head += " (the call may be attempted again)"
    else:
        head += f" {_outcome(p)}"
    by = resolved.get("by") if isinstance(resolved, Mapping) else None
    evidence = resolved.get("evidence") if isinstance(resolved, Mapping) else None
    detail = f"by {by or 'someone unnamed'}"
    if evidence:
        detail += f"; evidence: {clip(evidence)}"
    return "resolved", (head, detail)


def _tell_person(state: RunState, record: Record) -> tuple[str, tuple[str, ...]] | None:
    """An approval decision, the gate's tally, or an answer; ``None`` if shaped otherwise."""
    kind, p = record.kind, record.payload
    who = _who_call(state, p)
    if kind == R.DECISION and isinstance(d := p.get("decision"), Mapping):
        said = "approved" if d.get("approve") else "denied"
        signed = " (signed)" if d.get("signature") else ""
        line = f"{who} {said} by {d.get('approver')}{signed}"
        call = state.calls.get(str(p.get("call_id")))
        why = uncounted(state, call).get(record.seq) if call is not None else None
        if why is not None:
            line += f", not counted: {why}"
        return "decision", (line,)
    if kind == R.TALLY and isinstance(t := p.get("tally"), Mapping):
        approvals, denials = t.get("approvals") or [], t.get("denials") or []
        line = f"{who} gate {t.get('outcome')}: {len(approvals)} of {t.get('need')} approvals"
        if approvals:
            line += f" ({', '.join(map(str, approvals))})"
        if denials:
            line += f", denied by {', '.join(map(str, denials))}"
        return "gate", (line,)
    if kind == R.ANSWER and "value" in p:
        by = f" by {p['by']}" if p.get("by") else ""
        return "answer", (f"{who} {p.get('key')} = {clip(p.get('value'))}{by}",)
    return None


def _outcome(p: Mapping[str, Any]) -> str:
    if p.get("outcome") == "value":
        return f"-> {clip(p.get('value'))}"
    error = p.get("error")
    if isinstance(error, Mapping):
        return f"-> error {error.get('type')}: {clip(error.get('message'))}"
    return f"-> {p.get('outcome')}"


def _who(p: Mapping[str, Any]) -> str:
    return f"{p.get('call_id')} {p.get('tool')}"


def _who_call(state: RunState, p: Mapping[str, Any]) -> str:
    call: CallState | None = state.calls.get(str(p.get("call_id")))
    return f"{p.get('call_id')} {call.call.name if call is not None else '?'}"


def _now(tl: Timeline, origin: int) -> list[str]:
    lines = []
    if tl.status == NEVER_STARTED:
        lines.append(
            "never started: its process stopped before the input was journaled and nothing of "
            "it ran. Run it again with its input (resume cannot: there is nothing to resume)."
        )
    lease = tl.lease
    if tl.driven and lease is not None:
        lines.append(
            f"driven by {lease.owner.describe()} since {_clock(lease.acquired_ms)}; lease until "
            f"{_clock(lease.expires_ms)} (epoch {lease.epoch})"
        )
    for stop in tl.in_flight:
        when = f" at {_offset(stop.attempted_at_ms - origin)}" if stop.attempted_at_ms else ""
        lines.append(
            f"in flight: {stop.call_id} {stop.tool} was attempted{when} by the live drive and "
            "is running now: its outcome is not known yet (not halted; do not resolve it)"
        )
    for stop in tl.halted:
        when = f" at {_offset(stop.attempted_at_ms - origin)}" if stop.attempted_at_ms else ""
        what = (
            f"{stop.call_id} {stop.tool} was attempted{when} and has no result: it may have acted"
        )
        if stop.cause:
            what += f" (when it halted: {stop.cause})"
        if stop.reconciling is not None:
            what += "; " + reconciling_text(stop.reconciling, int(time.time() * 1000))
        if tl.status == "halted":
            lines.append(f"halted: {what}")
        else:
            lines.append(
                f"unresolved: {what}. The run is {tl.status}, so nothing will run it again; "
                "resolve it to record what happened"
            )
    for stop in tl.waiting:
        if stop.kind == "input":
            lines.append(f"waiting: {stop.call_id} {stop.tool} asks {clip(stop.prompt)}")
        else:
            t = stop.tally or {}
            approvals = ", ".join(t.get("approvals", ())) or "none yet"
            lines.append(
                f"waiting: {stop.call_id} {stop.tool} needs an approval "
                f"({len(t.get('approvals', ()))} of {t.get('need', 1)}: {approvals})"
            )
    if tl.stopped is not None:
        lines.append(
            f"orphaned: no process drives it; its last drive stopped short of an end: "
            f"{tl.stopped.get('message')}. To continue: {tl.stopped.get('remedy')}."
        )
    if tl.status == "orphaned" and tl.stopped is None:
        last = f" (its last owner: {lease.owner.describe()})" if lease is not None else ""
        lines.append(
            f"orphaned: not finished, and no live process drives it{last}: resume it, or let "
            "a worker"
        )
    if tl.status == "submitted":
        lines.append("submitted: started durably and not driven yet: a worker or resume drives it")
    if tl.status == "cancelled" and not any(e.kind == R.END for e in tl.events):
        lines.append("cancelled: the next drive stops it without a new turn or call.")
    return [*(f"WARNING: {anomaly}" for anomaly in tl.anomalies), *lines]


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def _offset(ms: int) -> str:
    if ms < 60_000:
        return f"+{ms / 1000:.3f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"+{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"+{hours}h{minutes:02d}m"


def uncounted(state: RunState, call: CallState) -> dict[int, str]:
    """Why each decision on ``call`` that did not count was left out, by its record's seq.

    Judged as the gate judges them (``approval.judge``), in journal order, under the policy the
    turn recorded for the call.
    """
    records = sorted(call.decisions, key=lambda r: r.seq)
    policy_json = call.plan.get("approval")
    if not isinstance(policy_json, Mapping):
        return {r.seq: "the call has no approval gate" for r in records}
    try:
        policy = ApprovalPolicy.from_json(policy_json)
    except ConfigError:
        return {r.seq: "the gate's recorded policy cannot be read" for r in records}
    _, reasons = judge(
        policy,
        call.decisions_made(),
        run_id=state.run_id,
        call_id=call.call.id,
        tool=call.call.name,
        arguments=call.call.arguments,
    )
    return {r.seq: why for r, why in zip(records, reasons, strict=True) if why is not None}


def _tally(state: RunState, call: CallState) -> Mapping[str, Any] | None:
    """The gate's running tally, under the policy the turn recorded for the call."""
    policy_json = call.plan.get("approval")
    if not isinstance(policy_json, Mapping):
        return None
    try:
        policy = ApprovalPolicy.from_json(policy_json)
    except ConfigError:
        return None
    return tally(
        policy,
        call.decisions_made(),
        run_id=state.run_id,
        call_id=call.call.id,
        tool=call.call.name,
        arguments=call.call.arguments,
    ).to_json()
