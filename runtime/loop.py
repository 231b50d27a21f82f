"""One drive of one run: the run level of ``docs/guarantee.md`` (the lease, replay, model turns,
the end). Each pending call is run to its typed outcome by ``runtime.calls``, through the narrow
handle ``runtime.drive.Drive`` that ``RunDrive`` implements.

``Agent.run``, ``resume`` and ``submit``, and the worker, make one ``RunDrive`` per drive.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

import runtime.events.hub as events  # the module alone: the package's names sit above the loop
from runtime import faults, history, tracing
from runtime import records as R
from runtime.calls import Calls
from runtime.drive import Cancelled, Outcome, RunEnded
from runtime.driving import driving as current_drive
from runtime.errors import (
    BudgetError,
    ConfigError,
    ModelError,
    ProtocolError,
    StorageError,
)
from runtime.holding import Holding
from runtime.journal.codec import unstorable, unstorable_text
from runtime.journal.journal import Journal
from runtime.journal.protocol import Store
from runtime.logs import get_logger
from runtime.messages import AssistantTurn
from runtime.ownership import Owner
from runtime.records import Appended, Entry, Record
from runtime.redact import clean
from runtime.result import Halt, RunResult, RunStatus, Waiting
from runtime.state import CallState, RunState
from runtime.tools import (
    KEY_SCHEME,
    ToolSpec,
)
from runtime.turns import Conversation, check_turn, plan_of

if TYPE_CHECKING:
    from runtime.agent import Agent

__all__ = ["RunDrive", "replay"]


@dataclass(frozen=True, slots=True)
class _Pending:
    """A record on its way to the journal: its guards and index update go with it."""

    record: Record
    """As folded into the drive's state; ``seq`` 0 until it commits."""
    guards: tuple[str, ...]
    index: Mapping[str, Any] | None
    release: bool = False
    """Release the lease in the same transaction (the run's end)."""


log = get_logger("runtime.agent")  # the logger name operators filter drives by

HISTORY_PREFIX = R.history_key(0).partition("/")[0] + "/"


async def replay(store: Store, run_id: str) -> RunState:
    """The state a drive resumes ``run_id`` from: its history chunks and the records after
    them (``runtime.history``), or the fold of every record if it has no chunk this bide
    reads."""
    chunks = await store.load(run_id, prefix=HISTORY_PREFIX)
    if chunks and all(_readable(c) for c in chunks):
        start = await store.get(run_id, R.START)
        tail = await store.load(run_id, after=chunks[-1].seq)
        return RunState.resumed(run_id, start, chunks, tail)
    return RunState.fold(run_id, await store.load(run_id))


def _readable(chunk: Record) -> bool:
    """Whether this bide reads the chunk (another version's is left to the records)."""
    return isinstance(chunk.payload, dict) and chunk.payload.get("v") == history.VERSION


class RunDrive:
    """One process executing one run from its journal until it ends, pauses or halts."""

    parent: Mapping[str, str] | None = None
    """For a child run (``runtime.children``): its parent run and call, journaled at start."""

    def __init__(
        self,
        agent: Agent,
        journal: Journal,
        run_id: str,
        *,
        owner: Owner | None = None,
        wait: float | None = None,
        submit_only: bool = False,
        holding: Holding | None = None,
        yielding: asyncio.Event | None = None,
    ):
        if (
            not isinstance(run_id, str)
            or not run_id
            or len(run_id) > 256
            or unstorable_text(run_id) is not None
        ):
            raise ConfigError(
                "a run id is a non-empty string of at most 256 chars of valid Unicode, "
                f"without NUL: {run_id!r}"
            )
        self.agent = agent
        self.journal = journal
        self.store = journal.store
        self.run_id = run_id
        self.state = RunState(run_id)
        self.owner = holding.owner if holding is not None else owner or Owner.here()
        self.driver = self.owner.id
        self.holding = holding or Holding(journal.renewer, run_id, self.owner)
        self.wait = wait
        self.yielding = yielding
        """Set (by a worker that stops): end the drive at the next record boundary, run kept."""
        self.submit_only = submit_only
        self.cancel_requested = False
        self.executed = 0
        self.key_scheme = KEY_SCHEME
        self.conversation = Conversation()
        self.ahead: tuple[_Pending, ...] = ()
        """Records written ahead (``write_ahead``), in order, not yet committed (a tuple: the
        empty one is shared, where every drive would keep an empty list)."""
        self._committing: asyncio.Future[None] | None = None
        """Set while an append commits records written ahead: the drive's other appends wait."""

    def cancelled(self) -> bool:
        """Whether a cancel request was seen (refreshed by every write of this drive)."""
        return self.cancel_requested

    async def go(self, input: str | None, spec: str | None) -> RunResult:
        # Bound and reset by token, not by a context manager: fewer objects per drive.
        token = structlog.contextvars.bind_contextvars(run_id=self.run_id)["run_id"]
        # An agent with child tools: they drive their child runs through this drive.
        driving = current_drive.set(self) if self.agent.delegates else None
        try:
            span = tracing.drive(self.agent.name, self.run_id)
            if span is tracing.NO_SPAN:  # not traced: no context manager kept for the drive
                return await self._drive(input, spec)
            with span:
                result = await self._drive(input, spec)
                tracing.finished(result)
                return result
        finally:
            structlog.contextvars.reset_contextvars(run_id=token)
            if driving is not None:
                current_drive.reset(driving)

    async def _drive(self, input: str | None, spec: str | None) -> RunResult:
        """The lease, the run opened, its steps; logged as the drive finishes or stops. One
        coroutine for all of it: each level is an object every drive keeps while it waits."""
        started = time.monotonic()
        try:
            if input is None and not await self.store.check_run(self.run_id):
                raise ConfigError(
                    f"no run {self.run_id!r} in {self.store.path}", run_id=self.run_id
                )
            if self.holding.lease is None:
                await self.holding.acquire(wait=self.wait)
            try:
                created = await self._open(input, spec)
                if self.submit_only:
                    result = await self._submitted(created)
                else:
                    try:
                        result = await self._steps()
                    except RunEnded:
                        # Another driver ended the run meanwhile: this drive appended nothing
                        # after the end, and reports the run as it ended, as a drive of a
                        # finished run does.
                        log.warning("run_ended_by_another_driver", status=self.state.status())
                        result = self._ended()
            finally:
                await self.holding.release()
        except BaseException as exc:
            log.info(
                "drive_stopped",
                error=f"{type(exc).__name__}: {exc}",
                turns=len(self.state.turns),
                executed=self.executed,
                ms=round((time.monotonic() - started) * 1000),
            )
            raise
        log.info(
            "drive_finished",
            status=result.status.value,
            turns=result.turns,
            executed=self.executed,
            ms=round((time.monotonic() - started) * 1000),
        )
        return result

    async def _steps(self) -> RunResult:
        while True:
            state = self.state  # a commit refused with records written ahead reloads it
            if state.end is not None:
                return self._ended()
            if self.yielding is not None and self.yielding.is_set():
                await self.flush()
                log.info("drive_yielded", turns=len(self.state.turns))
                return self._result(RunStatus.RUNNING)
            if self.cancelled() or state.cancel is not None:
                await Calls(self).cancel_handles(state.pending_calls())  # e.g. open MCP tasks
                return await self._end("cancelled")
            pending = state.pending_calls()
            if pending:
                stopped = await self._run_calls(pending)
                if stopped is not None:
                    return stopped
                continue
            if state.turns and not state.turns[-1].tool_calls:
                faults.crashpoint("end.before_marker")
                return await self._end("completed", output=state.turns[-1].text)
            failed = await self._next_turn()
            if failed is not None:
                return failed

    # --- opening ---------------------------------------------------------------------------

    async def _submitted(self, created: bool) -> RunResult:
        if self.state.end is not None:
            return self._ended()
        if created:
            await self.store.update_index(
                self.run_id, unless=R.END, epoch=self.holding.epoch, status="submitted"
            )
            log.info("run_submitted")
            return self._result(RunStatus.SUBMITTED)
        status = self.state.status()
        known = {s.value for s in RunStatus}
        return self._result(RunStatus(status) if status in known else RunStatus.RUNNING)

    async def _open(self, input: str | None, spec: str | None) -> bool:
        """Load the run (creating it if ``input`` is given); True if it was created."""
        store, run_id = self.store, self.run_id
        if input is None:
            created = False
        else:
            created = await store.create_run(
                run_id, agent=self.agent.name, epoch=self.holding.epoch
            )
        if not created:
            await self._replay()
        if self.state.start is None:
            if input is None:
                raise ConfigError(
                    f"run {run_id!r} never started (it stopped before its input was journaled): "
                    "run it again with its input",
                    run_id=run_id,
                )
            await self.append(
                R.START,
                R.START,
                {
                    "input": input,
                    "agent": self.agent.name,
                    "spec": spec,
                    "settings": {"max_turns": self.agent.max_turns},
                    "tools": _tools_digest(self.agent.specs),
                    "key_scheme": KEY_SCHEME,
                    **({"parent": dict(self.parent)} if self.parent is not None else {}),
                    **tracing.journaled_context(),
                },
            )
        start = self.state.start or {}
        # Runs started before key schemes were journaled used scheme 1: keep their keys.
        self.key_scheme = int(start.get("key_scheme") or 1)
        if input is not None and self.state.input != input:
            raise ConfigError(
                f"run {run_id!r} exists with a different input; a run's input is fixed when it "
                "starts (resume it without an input, or choose a new run id)",
                run_id=run_id,
            )
        tracing.drive_input(str(self.state.input))
        if not created:
            state = self.state
            chunks, settled = (0, 0) if state.history is None else state.history.read
            records = len(state.records) + chunks  # what the drive read to resume
            log.info("run_resumed", records=records, turns=len(state.turns))
            tracing.resumed(
                start,
                records=records,
                turns=len(state.turns),
                replayed=settled + sum(c.result is not None for c in state.calls.values()),
            )
        return created

    # --- the journal: appends, and records written ahead ----------------------------------

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

    # --- model turns -----------------------------------------------------------------------

    async def _next_turn(self) -> RunResult | None:
        n = len(self.state.turns) + 1
        if n > self.agent.max_turns:
            error = BudgetError(
                f"run {self.run_id!r} reached max_turns={self.agent.max_turns}",
                run_id=self.run_id,
            )
            await self._stop("max_turns", str(error), "raise max_turns in the agent, then resume")
            raise error
        try:
            turn = await self._ask_model()
        except ModelError as exc:
            if exc.retryable:
                await self._stop(
                    "model_unavailable",
                    f"the model is unavailable after retries: {exc}",
                    "resume once the model is back",
                )
                raise
            log.warning("model_failed", error=str(exc), status_code=exc.status_code)
            return await self._end("failed", error=f"model error: {exc}")
        faults.crashpoint("model.after_answer")
        check_turn(turn, self.state)
        plan = {}  # a loop, not a comprehension: no cell holds the drive while the model thinks
        for call in turn.tool_calls:
            plan[call.id] = plan_of(self.agent.tools, call.name)
        recorded = turn.to_json()
        problem = unstorable(recorded, name="turn")
        if problem is not None:
            raise ProtocolError(
                f"run {self.run_id!r}: the model's turn {n} cannot be journaled ({problem}); "
                "nothing was recorded, and a resume asks the model again",
                run_id=self.run_id,
            )
        chunk = self.state.history_chunk()  # the turns before this one, settled, in a record
        if chunk is not None:
            self.write_ahead(chunk[0], R.HISTORY, chunk[1], unless=R.CANCEL)
        # Committed with the first record that must be durable: a READ_ONLY call's result (it
        # ran meanwhile), a side effect's marker, the end; or alone before anything else acts.
        self.write_ahead(
            R.turn_key(n),
            R.TURN,
            {"n": n, "turn": recorded, "plan": plan},
            unless=R.CANCEL,
            index={"turns": n, "status": "running"},
        )
        return None

    async def _stop(self, reason: str, message: str, remedy: str) -> None:
        """Journal why this drive stops short of an end, so no view says the run is running."""
        turns = len(self.state.turns)
        await self.append(
            R.stop_key(turns, reason),
            R.STOP,
            {"reason": reason, "message": clean(message), "remedy": remedy, "turns": turns},
            index={"status": "orphaned", "detail": {"stopped": reason, "message": clean(message)}},
        )
        log.warning("drive_stopped_short", reason=reason, remedy=remedy)
        tracing.stopped(reason, remedy)

    async def _ask_model(self) -> AssistantTurn:
        agent, messages = self.agent, self.conversation.messages(self.state)
        n = len(self.state.turns) + 1
        with (
            tracing.chat(agent.model, n, agent.system_prompt, messages),
            events.asking(self.store, self.run_id, n),
        ):
            turn = await agent._retrying_model.complete(agent.system_prompt, messages, agent.specs)
            if not isinstance(turn, AssistantTurn):
                raise ProtocolError(f"the model returned {type(turn).__name__}, not a turn")
            tracing.answered(turn)
        return turn

    # --- tool calls ------------------------------------------------------------------------

    async def _run_calls(self, pending: Sequence[CallState]) -> RunResult | None:
        # Every call runs to its end: a halt or a failure in one never cancels a sibling
        # mid-effect, so gather with return_exceptions and decide once all have finished.
        outcomes: list[Outcome | BaseException]
        if len(pending) == 1:  # the common case, without a task and a gather
            try:
                outcomes = [await self._guarded(pending[0])]
            except Exception as exc:
                outcomes = [exc]
        else:
            limit = asyncio.Semaphore(self.agent.max_concurrency)  # a turn's calls at once
            outcomes = await asyncio.gather(
                *(self._limited(limit, c) for c in pending), return_exceptions=True
            )
        for outcome in outcomes:
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        halts = tuple(o for o in outcomes if isinstance(o, Halt))
        waits = tuple(o for o in outcomes if isinstance(o, Waiting))
        if waits:
            await self.flush()  # a gate that waits wrote nothing: the turn commits on its own
            if self.cancelled():  # refused by a cancel: the turn was never recorded
                return None
        if halts:
            await self.store.update_index(
                self.run_id,
                unless=R.END,  # another driver may have finished the run meanwhile
                epoch=self.holding.epoch,
                status="halted",
                detail={"halts": [h.to_json() for h in halts]},
            )
            return self._result(RunStatus.HALTED, halts=halts, waiting=waits)
        if waits:
            await self.store.update_index(
                self.run_id,
                unless=R.END,
                epoch=self.holding.epoch,
                status="waiting",
                detail={"waiting": [w.to_json() for w in waits]},
            )
            return self._result(RunStatus.WAITING, waiting=waits)
        if any(isinstance(o, Cancelled) for o in outcomes):
            return await self._end("cancelled")
        return None

    async def _limited(self, limit: asyncio.Semaphore, cs: CallState) -> Outcome:
        async with limit:
            return await self._guarded(cs)

    def _guarded(self, cs: CallState) -> Awaitable[Outcome]:
        # A Calls per call, never kept on the drive: a drive <-> Calls cycle would leave every
        # finished drive (its state, records, turns) to the cyclic collector.
        span = tracing.tool_call(cs.call.id, cs.call.name, cs.plan, cs.call.arguments)
        if span is tracing.NO_SPAN:  # not traced: the call's own coroutine, nothing around it
            return Calls(self).run(cs)
        return self._traced(span, cs)

    async def _traced(self, span: AbstractContextManager[None], cs: CallState) -> Outcome:
        with span:
            outcome = await Calls(self).run(cs)
            tracing.call_ended(outcome)
            return outcome

    # --- ending ----------------------------------------------------------------------------

    async def _end(
        self, status: str, *, output: str | None = None, error: str | None = None
    ) -> RunResult:
        await self.append(
            R.END,
            R.END,
            {"status": status, "output": output, "error": None if error is None else clean(error)},
            index={"status": status, "detail": None},
            release=self.holding.lease is not None,  # one transaction ends the run, frees the lease
        )
        return self._ended()

    def _ended(self) -> RunResult:
        end = self.state.end
        assert end is not None
        payload = end.payload
        return self._result(
            RunStatus(payload.get("status", "failed")),
            output=payload.get("output"),
            error=payload.get("error"),
        )

    def _result(self, status: RunStatus, **fields: Any) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=status,
            usage=self.state.usage,
            turns=len(self.state.turns),
            **fields,
        )


def _tools_digest(specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The agent's tools as a run's start record keeps them: how many, and a digest of each
    name with its Safety, so the record stays small however many tools a server lists (each
    call journals the Safety it ran under itself)."""
    listing = sorted([spec.name, spec.safety.value] for spec in specs)
    encoded = json.dumps(listing, separators=(",", ":")).encode()
    return {"count": len(listing), "sha256": hashlib.sha256(encoded).hexdigest()}
