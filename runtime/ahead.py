"""A drive's appends, and the records it writes ahead of them.

A drive folds a record into its run at once and commits it with its next append
(``write_ahead``): a turn whose calls are READ_ONLY shares the commit of their results, a side
effect's marker that of its turn, a final answer that of the end. ``WriteAhead`` keeps that
buffer and commits it, in order, all or nothing, fenced by the drive's epoch and guarded by the
run's end; ``replay`` is the state a drive resumes from (``docs/guarantee.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import runtime.events.hub as events  # the module alone: the package's names sit above
from runtime import faults, history
from runtime import records as R
from runtime.drive import RunEnded
from runtime.errors import StorageError
from runtime.holding import Holding
from runtime.logs import get_logger
from runtime.records import Appended, Entry, Record
from runtime.state import RunState
from runtime.store.protocol import Store
from runtime.turns import Conversation

__all__ = ["WriteAhead", "replay"]

log = get_logger("runtime.agent")  # the drive's logger: operators filter drives by it


@dataclass(frozen=True, slots=True)
class _Pending:
    """A record on its way to the journal: its guards and index update go with it."""

    record: Record
    """As folded into the drive's state; ``seq`` 0 until it commits."""
    guards: tuple[str, ...]
    index: Mapping[str, Any] | None
    release: bool = False
    """Release the lease in the same transaction (the run's end)."""


HISTORY_PREFIX = R.history_key(0).partition("/")[0] + "/"


async def replay(store: Store, run_id: str) -> RunState:
    """The state a drive resumes ``run_id`` from: its history chunks and the records after
    them (``runtime.history``), or the fold of every record if it has no chunk this bide
    reads."""
    chunks = await store.load(run_id, prefix=HISTORY_PREFIX)
    if chunks and all(_readable(c) for c in chunks):
        start = await store.get(run_id, R.START)
        tail = await store.load(run_id, after=chunks[-1].seq)
        state = RunState.resumed(run_id, start, chunks, tail)
        state.through = tail[-1].seq if tail else chunks[-1].seq
        return state
    records = await store.load(run_id)
    state = RunState.fold(run_id, records)
    state.through = records[-1].seq if records else 0
    return state


def _readable(chunk: Record) -> bool:
    """Whether this bide reads the chunk (another version's is left to the records)."""
    return isinstance(chunk.payload, dict) and chunk.payload.get("v") == history.VERSION


class WriteAhead:
    """The journal side of a drive (``loop.RunDrive``): its appends and what it wrote ahead."""

    store: Store
    run_id: str
    state: RunState
    holding: Holding
    conversation: Conversation
    cancel_requested: bool
    ahead: tuple[_Pending, ...]
    """Records written ahead (``write_ahead``), in order, not yet committed (a tuple: the empty
    one is shared, where every drive would keep an empty list)."""
    _committing: asyncio.Future[None] | None
    """Set while an append commits records written ahead: the drive's other appends wait."""

    async def append(
        self,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        index: Mapping[str, Any] | None = None,
        after_end: bool = False,
        release: bool = False,
    ) -> Appended:
        """Append one record, committing first, in the same transaction, whatever this drive
        wrote ahead (its latest turn): all of them or none. ``release``: the lease is released
        in that transaction too, if it commits (the run's end: nothing is appended after it)."""
        while self._committing is not None:  # another call is committing what was ahead
            await self._committing
        call_id = payload.get("call_id") if isinstance(payload, dict) else None
        if isinstance(call_id, str) and call_id not in self.state.calls:
            # The call's turn was written ahead and refused: nothing of the call is kept.
            log.warning("record_not_written", key=key, reason="its turn was never recorded")
            return Appended(False, None)
        entry = self._entry(key, kind, payload, unless, index, after_end, release)
        return await self._commit(entry)

    def write_ahead(
        self,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        index: Mapping[str, Any] | None = None,
    ) -> Record:
        """Fold a record into the run now and commit it with this drive's next append (or
        ``flush``): a turn whose calls are READ_ONLY thus shares the commit of their results,
        a side effect's marker that of its turn, and a final answer that of the end. Until
        then nothing of it is in the journal: a crash forgets it, so the next drive asks the
        model again (``docs/guarantee.md``)."""
        ahead = self._entry(key, kind, payload, unless, index, False, False)
        self.ahead = (*self.ahead, ahead)
        self.state.add_ahead(ahead.record)
        return ahead.record

    async def flush(self) -> None:
        """Commit what this drive wrote ahead, if anything: before a tool that is not
        READ_ONLY runs, and before the drive pauses or stops."""
        while self._committing is not None:
            await self._committing
        if self.ahead:
            *before, last = self.ahead
            self.ahead = tuple(before)
            await self._commit(last, own=True)

    def _entry(
        self,
        key: str,
        kind: str,
        payload: Any,
        unless: str | None,
        index: Mapping[str, Any] | None,
        after_end: bool,
        release: bool,
    ) -> _Pending:
        # Nothing is appended to a run after its end (another driver may have ended it), but
        # for the end itself and the evidence kept when a result arrives too late.
        guards: tuple[str, ...] = () if after_end or key == R.END else (R.END,)
        if unless is not None:
            guards += (unless,)
        self.holding.check()
        if isinstance(payload, dict):
            # Which lease wrote it: the records alone show that no two owners drove at once.
            payload = {**payload, "epoch": self.holding.epoch}
        return _Pending(Record(0, self.run_id, key, kind, payload, 0), guards, index, release)

    async def _commit(self, entry: _Pending, *, own: bool = False) -> Appended:
        """Commit ``entry`` after the records written ahead; ``own`` if it was one of them."""
        ahead, self.ahead = self.ahead, ()
        if not ahead and not own:
            appended = await self._write(entry, ())
        else:
            committing = self._committing = asyncio.get_running_loop().create_future()
            try:
                faults.crashpoint("turn.before_record")
                try:
                    appended = await self._write(entry, ahead)
                except BaseException:
                    # Nothing of it was committed: the next append carries it again.
                    self.ahead = (*ahead, *((entry,) if own else ()), *self.ahead)
                    raise
                if appended.record is None:
                    # Refused (a cancel, or the end): what was written ahead is not recorded.
                    await self._replay()
                else:
                    for pending, record in zip(ahead, appended.before, strict=True):
                        self.state.committed(pending.record, record)
                    if own:
                        self.state.committed(entry.record, appended.record)
                    self._recorded([*ahead, *([entry] if own else [])])
            finally:
                self._committing = None
                committing.set_result(None)
        if appended.record is not None:
            events.committed(self.store, self.run_id, appended.record.seq)
        if appended.refused_by == R.END:
            end = await self.store.get(self.run_id, R.END)
            if end is None:  # pragma: no cover - the guard saw it in the same transaction
                raise StorageError(f"run {self.run_id!r}: its end record vanished")
            self.state.add(end)
            raise RunEnded(entry.record.key)
        if appended.released:
            self.holding.ended()
        if appended.watched:
            self.cancel_requested = True
        if appended.record is not None and not own:
            self.state.add(appended.record)
        return appended

    def _write(self, entry: _Pending, ahead: Sequence[_Pending]) -> Awaitable[Appended]:
        """The store's append of ``entry`` after ``ahead`` (awaited by ``_commit``: one
        coroutine fewer in every drive waiting on a commit)."""
        guards = entry.guards
        index = entry.index or None  # the store copies it
        if ahead:  # merged in order: the index says what the last of them says
            merged: dict[str, Any] = {}
            for pending in ahead:
                guards += tuple(g for g in pending.guards if g not in guards)
                merged.update(pending.index or {})
            merged.update(entry.index or {})
            index = merged or None
        record = entry.record
        return self.store.append(
            self.run_id,
            record.key,
            record.kind,
            record.payload,
            unless=guards or None,
            watch=R.CANCEL,
            index=index,
            epoch=self.holding.epoch,
            before=tuple(Entry(p.record.key, p.record.kind, p.record.payload) for p in ahead)
            if ahead
            else (),
            release=entry.release,
        )

    def _recorded(self, committed: Sequence[_Pending]) -> None:
        for pending in committed:
            if pending.record.kind == R.TURN:
                turn = pending.record.payload
                faults.crashpoint("turn.after_record")
                log.info("turn_recorded", n=turn["n"], tool_calls=len(turn["turn"]["tool_calls"]))

    async def _replay(self) -> None:
        """The run's state from the journal: when the drive opens it, and again after a
        commit with records written ahead was refused."""
        self.state = await replay(self.store, self.run_id)
        self.conversation = Conversation()
