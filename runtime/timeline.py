"""A run's timeline, derived from its records alone: what happened, in commit order, in words.

Pure (no I/O): ``python -m runtime show`` prints ``render(timeline(state))`` and ``--json`` prints
``Timeline.to_json()``. Where the run stands comes from ``runtime.stops``, each record's words from
``runtime.telling``. ``read`` folds a run's records without letting one malformed record hide
the others' runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from runtime import records as R
from runtime import telling
from runtime.errors import CorruptJournal, ProtocolError
from runtime.messages import Usage
from runtime.records import Record
from runtime.state import RunState
from runtime.stops import (
    NEVER_STARTED,
    Stop,
    halted_on,
    in_flight_on,
    reconciling_text,
    status_of,
    stopped_on,
    waiting_on,
)
from runtime.telling import Event
from runtime.terminal import clip, printable

if TYPE_CHECKING:
    from runtime.ownership import Lease

__all__ = ["UNREADABLE", "Timeline", "Unreadable", "read", "render", "timeline"]

UNREADABLE = "unreadable"
"""What ``list`` shows for a run one of whose records cannot be decoded or folded."""

_T = TypeVar("_T")


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
    output: Any
    """The answer of a completed run: its text, or its typed output as JSON data."""
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
    session: Mapping[str, Any] | None = None
    """For a session's message: the session (``id``), its place (``k``) and the runs before."""

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
            "session": dict(self.session) if self.session is not None else None,
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
    if isinstance(exc, CorruptJournal) and exc.key == record.key:
        return Unreadable(run_id, str(exc))  # it names the record already
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
        events=tuple(e for r in records if (e := telling.event(state, r)) is not None),
        stopped=stopped_on(state),
        anomalies=tuple(state.anomalies()),
        in_flight=in_flight_on(state, driving),
        lease=lease,
        driven=driving is not None,
        session=start.get("session") if isinstance(start.get("session"), Mapping) else None,
    )


def render(tl: Timeline) -> list[str]:
    """The timeline as text lines: a header, one block per record, then where the run stands."""
    head = f"run {tl.run_id}: {tl.status}"
    facts = [f"agent {tl.agent}" if tl.agent else "agent ?"]
    if tl.spec:
        facts.append(f"spec {tl.spec}")
    if tl.session is not None:
        facts.append(f"session {tl.session.get('id')} message {tl.session.get('k')}")
    facts.append(f"{tl.turns} turn{'s' if tl.turns != 1 else ''}")
    if tl.usage.input_tokens or tl.usage.output_tokens:
        facts.append(f"tokens {tl.usage.input_tokens} in / {tl.usage.output_tokens} out")
    if tl.usage.cost is not None:
        facts.append(f"cost {tl.usage.cost:g}")
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
            f"driven by {lease.owner.describe()} since {_clock(lease.wall_ms(lease.acquired_ms))}; "
            f"lease until {_clock(lease.wall_ms(lease.expires_ms))} (epoch {lease.epoch})"
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
            f"{stop.call_id} {stop.tool} was attempted{when} (attempt {stop.attempt or 1}) and "
            "has no result: it may have acted"
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
        elif stop.kind == "timer":
            lines.append(
                f"waiting: {stop.call_id} {stop.tool} sleeps until {stop.due_at}: a worker "
                "drives the run again then"
            )
        elif stop.kind == "signal" and stop.arrived:
            lines.append(
                f"waiting: {stop.call_id} {stop.tool} waits for a signal {stop.signal}, and one "
                "came: the next drive (a worker, or resume) gives it to the tool"
            )
        elif stop.kind == "signal":
            until = f" (until {stop.due_at}, then it times out)" if stop.due_at else ""
            lines.append(
                f"waiting: {stop.call_id} {stop.tool} waits for a signal {stop.signal}{until}: "
                f"send it with `signal RUN_ID {stop.signal} --value JSON`"
            )
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
