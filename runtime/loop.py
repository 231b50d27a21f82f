"""One drive of one run: the run level of ``docs/guarantee.md`` (the lease, replay, model turns,
the end). Each pending call is run to its typed outcome by ``runtime.calls``, through the narrow
handle ``runtime.drive.Drive`` that ``RunDrive`` implements.

``Agent.run``, ``resume`` and ``submit``, and the worker, make one ``RunDrive`` per drive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import structlog

import runtime.events.hub as events  # the module alone: the package's names sit above the loop
from runtime import answers, faults, tracing
from runtime import records as R
from runtime.ahead import replay
from runtime.bounds import RunBounds
from runtime.calls import Calls
from runtime.drive import Cancelled, DrivenAgent, Outcome, RunEnded
from runtime.driving import driving as current_drive
from runtime.errors import (
    BudgetError,
    ConfigError,
    ModelError,
    ProtocolError,
)
from runtime.holding import Holding
from runtime.journal.journal import Journal
from runtime.jsontext import unstorable, unstorable_text
from runtime.limits import spent
from runtime.logs import get_logger
from runtime.messages import AssistantTurn, Message
from runtime.output import OUTPUT_TOOL, as_conversation, with_output_call
from runtime.ownership import Owner
from runtime.redact import clean
from runtime.result import Halt, RunResult, RunStatus, Waiting
from runtime.sessions import Opening, Summary
from runtime.state import CallState, RunState
from runtime.store.decide import WAKE_KINDS
from runtime.summaries import summarized
from runtime.tools import (
    KEY_SCHEME,
)
from runtime.tree import spent_below
from runtime.turns import Conversation, check_turn, plan_of

__all__ = ["RunDrive", "replay"]


log = get_logger("runtime.agent")  # the logger name operators filter drives by


class RunDrive(RunBounds):
    """One process executing one run from its journal until it ends, pauses or halts. Its
    appends, and the records it writes ahead of them, are ``ahead.WriteAhead``'s; its start
    and end records ``bounds.RunBounds``'."""

    def __init__(
        self,
        agent: DrivenAgent,
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
        self.ahead = ()
        self.session: Opening | None = None
        """For a session's new message: its place, pinned in the start record."""
        self.prefix: Sequence[Message] = ()
        """A session's earlier messages, as the model sees them before this run's."""
        self.summarized = False
        """Whether ``prefix`` went through the agent's ``Summary`` (``runtime.sessions``)."""
        self._committing = None

    def cancelled(self) -> bool:
        """Whether a cancel request was seen (refreshed by every write of this drive)."""
        return self.cancel_requested

    async def go(self, input: str | None, spec: str | None) -> RunResult[Any]:
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

    async def _drive(self, input: str | None, spec: str | None) -> RunResult[Any]:
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

    async def _steps(self) -> RunResult[Any]:
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
            if pending and self.agent.answers:  # the output calls the runtime settles itself
                pending = await answers.settle(self, pending)
                if not pending:
                    continue
            if pending:
                over = await self._over_limit(before_calls=True)
                if over is not None:
                    return await self._stop_over_limit(over, pending)
                stopped = await self._run_calls(pending)
                if stopped is not None:
                    return stopped
                continue
            if state.turns and self.agent.answers:
                verdict = answers.verdict(self.agent, state)
                if isinstance(verdict, answers.Answered):
                    faults.crashpoint("end.before_marker")
                    return await self._end("completed", output=verdict.output)
                if isinstance(verdict, answers.Rejected):
                    return await self._end("failed", error=verdict.error)
            elif state.turns and not state.turns[-1].tool_calls:
                faults.crashpoint("end.before_marker")
                return await self._end("completed", output=state.turns[-1].text)
            failed = await self._next_turn()
            if failed is not None:
                return failed

    # --- model turns -----------------------------------------------------------------------

    async def _next_turn(self) -> RunResult[Any] | None:
        n = len(self.state.turns) + 1
        if n > self.agent.max_turns:
            error = BudgetError(
                f"run {self.run_id!r} reached max_turns={self.agent.max_turns}",
                run_id=self.run_id,
            )
            await self._stop("max_turns", str(error), "raise max_turns in the agent, then resume")
            raise error
        over = await self._over_limit(before_calls=False)
        if over is not None:
            return await self._stop_over_limit(over, ())
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
            if call.name == OUTPUT_TOOL and self.agent.output is not None:
                plan[call.id] = {"safety": "read_only", "approval": None, "output": True}
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

    async def _over_limit(self, *, before_calls: bool) -> str | None:
        """Why the next model request, or running the last turn's calls, would go over the
        agent's usage limits (``runtime.limits``), or those of a run above this child run,
        counted from the records of the run and of its child runs."""
        limits = self.agent.usage_limits
        if limits is None and not self.outer:
            return None
        used = spent(self.state, output_calls=self.agent.output is not None)
        used = used + await spent_below(self.journal, self.state)
        if limits is not None:
            why = limits.check(used, before_calls=before_calls)
            if why is not None:
                return why
        for above in self.outer:
            why = above.limits.check(above.outside + used, before_calls=before_calls)
            if why is not None:
                return f"{why} (the limit of {above.run_id}, counted over its child runs)"
        return None

    async def _stop_over_limit(self, over: str, pending: Sequence[CallState]) -> RunResult[Any]:
        """End the run failed, over a limit; a call already attempted is run to its outcome
        first (recorded, or halted as it would be), never abandoned."""
        attempted = [cs for cs in pending if cs.marker is not None]
        if attempted:
            stopped = await self._run_calls(attempted)
            if stopped is not None:
                return stopped
        log.warning("usage_limit_exceeded", reason=over)
        return await self._end("failed", error=over)

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
        output, tools = None, agent.specs
        if isinstance(agent.session_history, Summary) and not self.summarized:
            self.prefix = await summarized(self, agent.session_history, self.prefix)
            self.summarized = True
        if self.prefix:  # a session's earlier messages (runtime.sessions)
            messages = [*self.prefix, *messages]  # type: ignore[assignment]
        if agent.output is not None:  # runtime.output: how the model is asked for the answer
            messages = as_conversation(messages)  # type: ignore[assignment]
            if agent.asks_output:
                output = agent.output.spec
            else:
                tools = (*tools, agent.output.spec.tool())
        with (
            tracing.chat(agent.model, n, agent.system_prompt, messages),
            events.asking(self.store, self.run_id, n),
        ):
            turn = await agent._retrying_model.complete(
                agent.system_prompt, messages, tools, output=output
            )
            if not isinstance(turn, AssistantTurn):
                raise ProtocolError(f"the model returned {type(turn).__name__}, not a turn")
            tracing.answered(turn)
        if agent.output is not None:
            turn = with_output_call(turn, n)
        return turn

    # --- tool calls ------------------------------------------------------------------------

    async def _run_calls(self, pending: Sequence[CallState]) -> RunResult[Any] | None:
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
            dues = [w.due_ms for w in waits if w.due_ms is not None]
            await self.store.update_index(
                self.run_id,
                unless=R.END,
                epoch=self.holding.epoch,
                status="waiting",
                detail={"waiting": [w.to_json() for w in waits]},
                due_ms=min(dues) if dues else None,
                wake_seq=await self._seen_through(),
            )
            return self._result(RunStatus.WAITING, waiting=waits)
        if any(isinstance(o, Cancelled) for o in outcomes):
            return await self._end("cancelled")
        return None

    async def _seen_through(self) -> int:
        """The ``seq`` through which this drive saw every record of its run, for the wait it
        stops on: a record another writer commits after it (an answer, a decision, a signal)
        wakes the run. Read now: one committed while the drive ran, and not seen, counts too."""
        state = self.state
        fresh = await self.store.load(self.run_id, after=state.through)
        unseen = [r.seq for r in fresh if r.kind in WAKE_KINDS and not state.saw(r.seq)]
        if unseen:
            return min(unseen) - 1
        return fresh[-1].seq if fresh else state.through

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
