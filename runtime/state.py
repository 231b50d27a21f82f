"""A run's state, folded from its records: what was asked, answered, attempted and decided.

Pure: no I/O. The driver folds records as it writes them; ``show``, ``list`` and resolution fold
a loaded journal the same way, so every status is derived from records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime import history
from runtime import records as R
from runtime.callstate import CallState, acted
from runtime.errors import CorruptJournal, ProtocolError
from runtime.history import History, Turns, chunk, disagreement
from runtime.messages import AssistantTurn, Usage
from runtime.records import Record

if TYPE_CHECKING:
    from runtime.ownership import Lease

__all__ = ["CallState", "RunState"]


@dataclass(slots=True)
class RunState:
    """The fold of a run's records."""

    run_id: str
    start: Mapping[str, Any] | None = None
    turns: Turns = field(default_factory=Turns)
    calls: dict[str, CallState] = field(default_factory=dict)
    """The calls of the turns folded from records (of every turn, without a history)."""
    cancel: Record | None = None
    end: Record | None = None
    stops: list[Record] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    records: list[Record] = field(default_factory=list)
    """The records folded (with a history: the start and those after its last chunk)."""
    history: History | None = None
    """The history chunks a resumed drive started from, if it did (``resumed``)."""
    chunked: int = 0
    """How many of the first turns a history chunk holds."""
    through: int = 0
    """The highest ``seq`` of the records a replay loaded: the state holds every record of the
    run up to it (later ones: those its drive wrote, or was answered with)."""
    _seen: set[int] = field(default_factory=set)

    @classmethod
    def fold(cls, run_id: str, records: Iterable[Record]) -> RunState:
        state = cls(run_id)
        for record in records:
            state.add(record)
        return state

    @classmethod
    def resumed(
        cls, run_id: str, start: Record | None, chunks: Sequence[Record], tail: Iterable[Record]
    ) -> RunState:
        """The state a drive resumes from: the history chunks, then the records after the
        last of them (and the start, which came before them). It agrees with the fold of every
        record in all a drive asks of it: turns, usage, pending calls, status, the calls known
        (``knows_call``). Its ``calls`` are those of the turns after the chunks only."""
        history = History(run_id, chunks)
        state = cls(run_id, turns=Turns(history), usage=history.usage, history=history)
        state.chunked = history.count
        if start is not None:
            state.add(start)
        for record in tail:
            state.add(record)
        return state

    def history_chunk(self) -> tuple[str, dict[str, Any]] | None:
        """The key and payload of the next history chunk (``runtime.history``), if the turns
        since the last one make one, all their calls settled; asked before a new turn."""
        if len(self.turns) - self.chunked < history.EVERY or self.pending_calls():
            return None
        first = self.chunked + 1
        return chunk(first, self.turns[first - 1 :], self._told, self.usage)

    def _told(self, call_id: str) -> tuple[Any, bool]:
        return self.calls[call_id].message_content()

    def knows_call(self, call_id: str) -> bool:
        """Whether a recorded turn asked for a call with this id."""
        return call_id in self.calls or (self.history is not None and self.history.knows(call_id))

    def add(self, record: Record) -> None:
        """Fold one record in (once; records of concurrent writers may arrive out of order).

        Unknown kinds are kept (shown) but change nothing.
        """
        if record.seq in self._seen:
            return
        self._seen.add(record.seq)
        self._checked_fold(record)

    def saw(self, seq: int) -> bool:
        """Whether the record of this ``seq`` was folded in."""
        return seq in self._seen

    def add_ahead(self, record: Record) -> None:
        """Fold a record its drive wrote ahead: not committed yet (its ``seq`` is 0), it
        commits with the drive's next append, and ``committed`` then gives its place."""
        self._checked_fold(record)

    def _checked_fold(self, record: Record) -> None:
        """``_fold``, with a record that lacks what its kind needs (another program wrote it,
        or it was damaged) named as ``CorruptJournal`` rather than a bare ``KeyError``."""
        try:
            self._fold(record)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"no {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
            raise CorruptJournal(
                f"record {record.key!r} of run {self.run_id!r} (seq {record.seq}) does not "
                f"have the shape of a {record.kind!r} record ({why})",
                run_id=self.run_id,
                key=record.key,
                seq=record.seq,
            ) from exc

    def committed(self, ahead: Record, record: Record) -> None:
        """``ahead``, folded by ``add_ahead``, is committed as ``record``."""
        for i in range(len(self.records) - 1, -1, -1):
            if self.records[i] is ahead:
                self.records[i] = record
                self._seen.add(record.seq)
                return
        raise ValueError(f"record {ahead.key!r} was not written ahead in run {self.run_id}")

    def _fold(self, record: Record) -> None:
        self.records.append(record)
        kind, payload = record.kind, record.payload
        if kind == R.START:
            self.start = payload
        elif kind == R.TURN:
            self._add_turn(record)
        elif kind in _OF_A_CALL:
            call = self._call(record)
            if call is None:
                return  # of a settled call of the history: it changes nothing any more
            if kind in (R.ATTEMPT, R.RESULT, R.LATE, R.HALT):
                attempt = int(payload["attempt"])
                by_kind = {R.ATTEMPT: call.markers, R.RESULT: call.results, R.LATE: call.late}
                by_kind.get(kind, call.halts)[attempt] = record
            elif kind == R.HANDLE:
                steps = call.handles.setdefault(int(payload["attempt"]), {})
                steps[int(payload.get("n", 1))] = record
            elif kind == R.DECISION:
                call.decisions.append(record)
            elif kind == R.TALLY:
                call.tallies[str(payload["policy"])] = record
            elif kind == R.INTERRUPT:
                call.interrupts[str(payload["key"])] = record
            elif kind == R.ANSWER:
                call.answers[str(payload["key"])] = record
            elif kind == R.WAIT:
                call.waits[int(payload["n"])] = record
            elif kind == R.RECEIVED:
                call.received[int(payload["n"])] = record
            else:
                call.reconciles.setdefault(int(payload["attempt"]), []).append(record)
        elif kind == R.HISTORY:  # any chunk, read or not: the next one's key follows it
            last = payload.get("last") if isinstance(payload, Mapping) else None
            if isinstance(last, int) and last > self.chunked:
                self.chunked = last
        elif kind == R.CANCEL:
            self.cancel = record
        elif kind == R.STOP:
            self.stops.append(record)
        elif kind == R.END:
            self.end = record

    def _add_turn(self, record: Record) -> None:
        n = int(record.payload["n"])
        if n != len(self.turns) + 1:
            raise ProtocolError(
                f"run {self.run_id}: turn {n} recorded after turn {len(self.turns)}",
                run_id=self.run_id,
            )
        turn = AssistantTurn.from_json(record.payload["turn"])
        plans = record.payload.get("plan") or {}
        self.turns.append(turn)
        self.usage = self.usage + turn.usage
        for call in turn.tool_calls:
            self.calls[call.id] = CallState(call, n, plans.get(call.id) or {})

    def _call(self, record: Record) -> CallState | None:
        call_id = record.payload.get("call_id")
        state = self.calls.get(call_id) if isinstance(call_id, str) else None
        if state is None:
            history = self.history
            if history is not None and isinstance(call_id, str) and history.knows(call_id):
                return None
            raise ProtocolError(
                f"run {self.run_id}: record {record.key!r} names call {call_id!r}, which no "
                "recorded turn asked for",
                run_id=self.run_id,
            )
        return state

    # --- derived views ----------------------------------------------------------------------

    @property
    def input(self) -> Any:
        return None if self.start is None else self.start.get("input")

    def pending_calls(self) -> list[CallState]:
        """The last turn's calls without an outcome, in the order the model asked for them."""
        if not self.turns.live:
            return []  # no turn, or every turn is in the history: all its calls are settled
        last = self.turns.live[-1]
        return [self.calls[c.id] for c in last.tool_calls if self.calls[c.id].result is None]

    def status(self) -> str:
        """The run's status as the records alone tell it (no driver is consulted)."""
        if self.end is not None:
            return str(self.end.payload.get("status", "failed"))
        if self.cancel is not None:
            return "cancelled"
        if self.stop is not None:
            return "orphaned"
        pending = self.pending_calls()
        if any(c.halted for c in pending):
            return "halted"
        if any(self._waits(c) for c in pending):
            return "waiting"
        return "running"

    @property
    def stop(self) -> Record | None:
        """The journaled reason the last drive stopped short of an end, while it still holds
        (no turn was recorded since): the run is not being driven."""
        turns = len(self.turns)
        current = [r for r in self.stops if r.payload.get("turns") == turns]
        if not current or self.pending_calls():
            return None
        return max(current, key=lambda r: r.seq)

    def _waits(self, call: CallState) -> bool:
        if call.interrupts.keys() - call.answers.keys():
            return True
        if call.waits:
            # Its tool's latest wait: a sleep (due or not, until the tool goes on past it) or a
            # receive not yet given anything.
            n = max(call.waits)
            if call.waits[n].payload.get("what") == "sleep" or n not in call.received:
                return True
        return bool(call.plan.get("approval")) and not call.tallies

    def live_status(self, driving: Lease | None, *, submitted: bool = False) -> str:
        """The status with liveness: ``driving`` is the run's lease if a live owner holds it
        (``ownership.is_alive``), else None.

        A run a live owner drives is ``running`` (a marker without a result is then a call in
        flight, not a halt); a run the records call running that no live owner drives is
        ``orphaned`` (resume it, or let a worker), or ``submitted`` if it was never driven.
        """
        status = self.status()
        if self.end is not None or self.cancel is not None or self.stop is not None:
            return status
        if driving is not None:
            return "running"
        if status == "running":
            return "submitted" if submitted else "orphaned"
        return status

    def in_flight(self, driving: Lease | None) -> list[CallState]:
        """The side effects attempted under ``driving``, a live owner's lease, and not finished:
        they are running now. Never halted, never to be resolved while that lease lives."""
        if driving is None:
            return []
        return [
            c
            for c in self.unresolved_calls()
            if c.marker is not None and c.marker.payload.get("epoch") == driving.epoch
        ]

    def halted_calls(self) -> list[CallState]:
        return [c for c in self.pending_calls() if c.halted]

    def unresolved_calls(self) -> list[CallState]:
        """Every call attempted without a recorded result, in the order the model asked for
        them, whatever the run's status: each may have acted, and only a resolution says
        whether it did. For a run still going these are its halted calls; a cancelled or ended
        run keeps them too (ending a run does not say what its calls did)."""
        return [c for c in self.calls.values() if c.unknown_outcome]

    def waiting_calls(self) -> list[CallState]:
        """Pending calls that wait for a person (an approval or an answer), by the same rule
        ``status()`` uses."""
        return [c for c in self.pending_calls() if not c.halted and self._waits(c)]

    def anomalies(self) -> list[str]:
        """What in the records says the run may have acted twice or broke the journal's rules.

        Empty for every journal this bide writes; an older bide (before ownership and the end
        guard) could leave a second attempt's result, or records after the end.
        """
        found = []
        for c in self.calls.values():
            ran = [k for k in sorted(c.markers) if acted(c, k)]
            if len(ran) > 1:
                attempts = ", ".join(map(str, ran))
                found.append(
                    f"may have acted twice: call {c.call.id} ({c.call.name}) has "
                    f"{len(ran)} attempts with results ({attempts})"
                )
        for record in self.records:
            if record.kind == R.HISTORY and self.history is None:
                problem = disagreement(record, self.turns, self._told)
                if problem is not None:
                    found.append(
                        f"history chunk {record.key} (seq {record.seq}) disagrees with the "
                        f"records: {problem}"
                    )
        if self.end is not None:
            end = self.end.seq
            after = sorted(
                (r for r in self.records if r.seq > end and not _allowed_after_end(r)),
                key=lambda r: r.seq,
            )
            if after:
                found.append(
                    "records after the end: " + ", ".join(f"{r.key} (seq {r.seq})" for r in after)
                )
        return found


_OF_A_CALL = frozenset(
    {
        R.ATTEMPT,
        R.RESULT,
        R.LATE,
        R.HALT,
        R.HANDLE,
        R.DECISION,
        R.TALLY,
        R.INTERRUPT,
        R.ANSWER,
        R.WAIT,
        R.RECEIVED,
        R.RECONCILE,
    }
)
"""The kinds of record that belong to one call (its payload's ``call_id``)."""


def _allowed_after_end(record: Record) -> bool:
    """What may follow a run's end: evidence of what an effect did (a late result, a handle to
    it, or a resolution settling an unknown outcome)."""
    if record.kind in (R.LATE, R.HALT, R.RECONCILE, R.HANDLE):
        return True
    return record.kind == R.RESULT and bool(
        isinstance(record.payload, Mapping) and record.payload.get("resolved")
    )
