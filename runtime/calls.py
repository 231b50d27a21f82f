"""One tool call, from its plan to a typed outcome: recorded, halted, waiting or cancelled.

The call-level rules of ``docs/guarantee.md`` (the attempt marker, the invocation, the retry of a
retry-safe call, the result that must not be lost, the halt) live here and nowhere else, with
those of the gate and the questions in ``runtime.asking``, of handles in ``runtime.handles`` and
of the reconciler a halt consults in ``runtime.reconcile``. A call sees its drive only through
``runtime.drive.Drive``: the run's identity, the agent's tools, the lease, the one way to append.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Mapping
from typing import Any

from runtime import asking, faults, reconcile, tracing
from runtime import records as R
from runtime.asking import Denied, policies
from runtime.drive import CANCELLED, RECORDED, Drive, Misuse, Outcome, Recorded, RunEnded
from runtime.errors import StorageError, ToolError, ToolOutcomeUnknown
from runtime.handles import cancel_handles, handle_recorder
from runtime.jsontext import unstorable
from runtime.logs import get_logger
from runtime.records import Appended
from runtime.redact import clean
from runtime.result import Halt, Waiting
from runtime.state import CallState
from runtime.tools import (
    Interrupted,
    Safety,
    Tool,
    ToolContext,
    enforces_timeout,
    idempotency_key_for,
    resumer,
)

__all__ = ["RESULT_COMMIT_RETRY", "Calls"]

log = get_logger(__name__)


class Calls:
    """Runs the calls of one drive, each to its ``Outcome``."""

    def __init__(self, drive: Drive):
        self.drive = drive

    async def run(self, cs: CallState) -> Outcome:
        """Run one pending call to its outcome: recorded, halted, waiting or cancelled."""
        call = cs.call
        handle = cs.handle
        if cs.marker is not None and handle is not None and not handle.in_flight:
            try:
                return await self._resume(cs, handle)
            except Interrupted as paused:
                log.info("run_waiting", call_id=call.id, tool=call.name, kind="input")
                resumed_waiting: Waiting = paused.waiting
                return resumed_waiting
            except Misuse as misuse:
                raise misuse.error from None
        if cs.marker is not None:
            cause = "the side effect was attempted and no result was recorded: it may have acted"
            if handle is not None:  # in flight: a further request of the attempt had left
                cause = (
                    f"step {handle.n} of the side effect's attempt had left and its reply was "
                    "not recorded: it may have acted"
                )
            recorded = cs.halt_cause
            if recorded is not None:
                cause += f" (when it halted: {recorded})"
            # The attempt was another drive's (this one took the lease over): it is over.
            verdict = await reconcile.in_drive(self.drive, cs, owner_gone=True)
            if verdict is not None and verdict.outcome is not None:
                return RECORDED  # settled: the next step sees its result, or its next attempt
            if verdict is not None:
                cause += f"; reconciling: {verdict.brief()}"
            return self._halt(cs, cause)
        k = cs.attempt
        tool = self.drive.agent.tools.get(call.name)
        if tool is None:
            return await self._record(
                cs, k, None, error=("unknown_tool", f"no tool named {call.name!r}")
            )
        problem = self.drive.agent.validate_arguments(call.name, call.arguments)
        if problem is not None:
            return await self._record(
                cs,
                k,
                _stricter(tool.spec.safety, cs.plan.get("safety")),
                error=("invalid_arguments", f"{call.name}: {problem}"),
            )
        if self.drive.cancelled():
            return CANCELLED
        # What the turn journaled binds the call: a build whose tool lost its gate or became
        # less strict never weakens it (a stricter build may tighten it).
        safety = _stricter(tool.spec.safety, cs.plan.get("safety"))
        for policy in policies(cs.plan, tool):
            gate = await asking.gate(self.drive, cs, policy)
            if isinstance(gate, Denied):
                error = ("approval_denied", gate.reason)
                return await self._record(cs, k, safety, error=error)
            if isinstance(gate, Waiting):
                return gate
        if self.drive.cancelled():
            return CANCELLED
        context = self._context(cs, k, safety)
        try:
            if safety is Safety.SIDE_EFFECT:
                return await self._side_effect(cs, k, tool, context)
            return await self._retry_safe(cs, k, tool, context)
        except Interrupted as paused:
            waiting: Waiting = paused.waiting
            log.info("run_waiting", call_id=call.id, tool=call.name, kind=waiting.kind)
            return waiting
        except Misuse as misuse:
            raise misuse.error from None

    async def cancel_handles(self, pending: list[CallState]) -> None:
        """The run is being cancelled: ask each open handle's tool to stop its effect."""
        await cancel_handles(self.drive, pending, self._context)

    def _context(self, cs: CallState, k: int, safety: Safety) -> ToolContext:
        call = cs.call
        return ToolContext(
            run_id=self.drive.run_id,
            call_id=call.id,
            tool_name=call.name,
            safety=safety,
            idempotency_key=idempotency_key_for(
                self.drive.run_id, call.id, scheme=self.drive.key_scheme
            ),
            interrupt=asking.interrupter(self.drive, cs, safety),
            record_handle=handle_recorder(self.drive, cs, k, safety),
        )

    async def _side_effect(
        self, cs: CallState, k: int, tool: Tool, context: ToolContext
    ) -> Outcome:
        call = cs.call
        faults.crashpoint("attempt.before_marker")
        marker = await self.drive.append(
            R.attempt_key(call.id, k),
            R.ATTEMPT,
            {
                "call_id": call.id,
                "attempt": k,
                "tool": call.name,
                "safety": Safety.SIDE_EFFECT.value,
                "driver": self.drive.holding.owner.id,
            },
            unless=R.CANCEL,
        )
        if marker.record is None:
            return CANCELLED
        if not marker.won:
            return self._halt(cs, "another driver attempted this call; its outcome is unknown here")
        faults.crashpoint("attempt.after_marker")
        tracing.marker_written(k)
        # Nothing leaves past this drive's own deadline for its lease (LeaseLost ends the
        # drive; the attempt, never sent, halts for the next owner to reconcile).
        await self.drive.holding.before_send()
        log.info("tool_started", call_id=call.id, tool=call.name, safety="side_effect")
        self.drive.executed += 1
        return await self._settle(cs, k, tool, context, self._invoke(tool, call.arguments, context))

    async def _resume(self, cs: CallState, handle: R.Handle) -> Outcome:
        """Continue an attempt that journaled a handle: the tool learns its outcome from it
        (an MCP tool polls its task) instead of the run halting on an unknown outcome."""
        call, k = cs.call, cs.attempt
        tool = self.drive.agent.tools.get(call.name)
        resume = resumer(tool) if tool is not None else None
        if tool is None or resume is None:
            return self._halt(
                cs,
                "the side effect was attempted and journaled a handle to its effect, but no "
                f"tool of this agent named {call.name} can resume it: it may have acted",
            )
        # A handle is only ever journaled by a SIDE_EFFECT: it resumes as one.
        context = self._context(cs, k, Safety.SIDE_EFFECT)
        log.info("tool_resumed", call_id=call.id, tool=call.name, attempt=k)
        await self.drive.holding.before_send()  # a drive whose lease is over resumes nothing
        return await self._settle(
            cs, k, tool, context, self._bounded(tool, resume(handle.value, call.arguments, context))
        )

    async def _settle(
        self, cs: CallState, k: int, tool: Tool, context: ToolContext, running: Awaitable[Any]
    ) -> Outcome:
        """Await a side effect's attempt (or its resumption) and record or halt on its outcome."""
        try:
            value = await running
        except ToolOutcomeUnknown as exc:
            return await self._halted(cs, k, exc, f"outcome unknown: {exc}")
        except ToolError as exc:
            faults.crashpoint("tool.after_call")
            return await self._record(cs, k, context.safety, error=_tool_error(exc))
        except TimeoutError as exc:
            return await self._halted(
                cs, k, exc, f"timed out after {tool.spec.timeout}s: it may have acted"
            )
        except Exception as exc:
            return await self._halted(
                cs,
                k,
                exc,
                f"raised {type(exc).__name__}: {exc} (not a ToolError: it may have acted)",
            )
        faults.crashpoint("tool.after_call")
        return await self._record(cs, k, context.safety, value=value)

    async def _retry_safe(self, cs: CallState, k: int, tool: Tool, context: ToolContext) -> Outcome:
        call, safety = cs.call, context.safety
        if safety is not Safety.READ_ONLY:
            # Its idempotency key is its call's: the turn naming the call must be durable
            # before the effect, or a crash would let the model name it anew, with a new key.
            # A READ_ONLY call runs at once: its turn commits with its result.
            await self.drive.flush()
            if self.drive.cancelled():  # the cancel refused the turn: no call of it may run
                return CANCELLED
        attempt = 0
        while True:
            attempt += 1
            # A drive whose lease is over (taken over, or past its own deadline and not renewed)
            # runs no further tool, not even a read: LeaseLost ends the drive.
            await self.drive.holding.before_send()
            log.info("tool_started", call_id=call.id, tool=call.name, safety=safety.value)
            self.drive.executed += 1
            try:
                value = await self._invoke(tool, call.arguments, context)
            except ToolOutcomeUnknown as exc:
                failure, kind = f"outcome unknown: {exc}", type(exc).__name__
            except ToolError as exc:
                faults.crashpoint("tool.after_call")
                return await self._record(cs, k, safety, error=_tool_error(exc))
            except TimeoutError:
                failure, kind = f"timed out after {tool.spec.timeout}s", "TimeoutError"
            except Exception as exc:
                failure, kind = f"raised {type(exc).__name__}: {exc}", type(exc).__name__
            else:
                faults.crashpoint("tool.after_call")
                return await self._record(cs, k, safety, value=value)
            delay = self.drive.agent.tool_retry.delay(attempt)
            if delay is None:
                return await self._record(
                    cs, k, safety, error=("tool_failed", f"{failure} (after {attempt} attempts)")
                )
            log.info("tool_retry", call_id=call.id, attempt=attempt, delay_s=round(delay, 3))
            tracing.tool_retry(attempt, delay, kind)
            await asyncio.sleep(delay)
            if self.drive.cancelled():
                return CANCELLED

    async def _invoke(self, tool: Tool, arguments: Any, context: ToolContext) -> Any:
        """Call ``tool``; its caller has just checked the lease (``Holding.before_send``), with
        no await since, so that nothing leaves a drive whose lease is over."""
        return await self._bounded(tool, tool.call(arguments, context))

    def _bounded(self, tool: Tool, running: Awaitable[Any]) -> Awaitable[Any]:
        timeout = tool.spec.timeout
        # A tool that enforces its spec's timeout itself (an MCP tool) keeps an answer that is in
        # hand at the deadline; a second deadline here would cancel it first and lose the answer.
        if timeout is None or enforces_timeout(tool):
            return running  # awaited by the caller: no coroutine of its own while a tool runs
        return _timed(running, timeout)

    async def _record(
        self,
        cs: CallState,
        k: int,
        safety: Safety | None,
        *,
        value: Any = None,
        error: tuple[str, str] | tuple[str, str, Any] | None = None,
    ) -> Recorded:
        call = cs.call
        payload: dict[str, Any] = {
            "call_id": call.id,
            "attempt": k,
            "tool": call.name,
            "safety": safety.value if safety is not None else None,
        }
        if error is None:
            problem = unstorable(value, name="result")
            if problem is not None:
                # It ran: what it returned cannot be kept, but that it ran must be.
                error = (
                    "unrecordable_result",
                    f"{call.name} ran, but its result cannot be journaled: {problem}",
                )
        elif len(error) == 3 and unstorable(error[2]) is not None:
            error = error[:2]
        if error is None:
            payload["outcome"] = "value"
            payload["value"] = value
        else:
            payload["outcome"] = "error"
            payload["error"] = R.error_payload(error[0], clean(error[1]), *error[2:])
        try:
            appended = await self._append_result(R.result_key(call.id, k), payload)
        except RunEnded:
            # The run ended meanwhile (another driver finished it): what this call did is kept
            # as evidence, never lost, and the drive stops.
            await self.drive.append(R.late_key(call.id, k), R.LATE, payload, after_end=True)
            log.warning("late_result_after_end", call_id=call.id, attempt=k)
            raise
        winner = appended.record.payload if appended.record is not None else {}
        tracing.recorded(winner or payload, won=appended.won)
        if not appended.won and winner.get("outcome") == "not_executed":
            # Resolved "not executed" while it was running: keep what really happened.
            await self.drive.append(R.late_key(call.id, k), R.LATE, payload, after_end=True)
            log.warning("late_result_after_resolution", call_id=call.id, attempt=k)
        faults.crashpoint("result.after_record")
        log.info(
            "tool_finished",
            call_id=call.id,
            tool=call.name,
            outcome=payload["outcome"],
            won=appended.won,
        )
        log.debug("tool_result", call_id=call.id, arguments=call.arguments, result=payload)
        return RECORDED

    async def _append_result(self, key: str, payload: Mapping[str, Any]) -> Appended:
        """Append a tool's result, retrying while the database is locked by someone else.

        The one record that must not be lost: the tool has run, and without its result the
        run halts on a call that in fact finished.
        """
        for delay in (*RESULT_COMMIT_RETRY, None):
            try:
                return await self.drive.append(key, R.RESULT, payload)
            except StorageError as exc:
                if not exc.transient or delay is None:
                    if exc.transient:
                        raise StorageError(
                            f"{exc} (the tool ran; its result could not be committed after "
                            f"{len(RESULT_COMMIT_RETRY) + 1} tries: the run halts on this call "
                            "until it is resolved)",
                            run_id=self.drive.run_id,
                        ) from exc
                    raise
                log.warning("result_commit_retry", key=key, delay_s=delay, error=str(exc))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _halted(self, cs: CallState, k: int, exc: BaseException, cause: str) -> Outcome:
        """Halt on this drive's own attempt, journaling the cause for every later view; then
        let the tool's reconciler look the effect up (it may find it: the call is settled)."""
        halt = self._halt(cs, cause)
        await self.drive.append(
            R.halt_key(cs.call.id, k),
            R.HALT,
            {
                "call_id": cs.call.id,
                "attempt": k,
                "error_type": type(exc).__name__,
                "cause": halt.cause,
            },
            after_end=True,  # evidence of an unknown effect is kept whatever happened meanwhile
        )
        # This drive owns the attempt and is alive: only *found* can settle it now.
        verdict = await reconcile.in_drive(self.drive, cs, owner_gone=False)
        if verdict is None:
            return halt
        if verdict.outcome is not None:
            return RECORDED
        return dataclasses.replace(halt, cause=f"{halt.cause}; reconciling: {verdict.brief()}")

    def _halt(self, cs: CallState, cause: str) -> Halt:
        marker = cs.marker
        cause = clean(cause, limit=2000)
        halt = Halt(
            call_id=cs.call.id,
            tool=cs.call.name,
            arguments=cs.call.arguments,
            attempted_at_ms=marker.created_ms if marker is not None else None,
            cause=cause,
            attempt=cs.attempt,
        )
        log.warning("tool_halted", call_id=cs.call.id, tool=cs.call.name, cause=cause)
        return halt


async def _timed(running: Awaitable[Any], seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await running


RESULT_COMMIT_RETRY = (0.1, 0.5, 1.0, 2.0, 4.0)
"""Seconds between tries of a result's commit while the database stays locked (each try also
waits for the journal's busy timeout)."""

_STRICTNESS = {Safety.READ_ONLY: 0, Safety.IDEMPOTENT: 1, Safety.SIDE_EFFECT: 2}


def _stricter(current: Safety, recorded: object) -> Safety:
    """The stricter of the tool's Safety now and the one journaled with its turn."""
    if recorded is None:
        return current
    try:
        journaled = Safety(str(recorded))
    except ValueError:
        journaled = Safety.SIDE_EFFECT  # unreadable: assume the worst
    return journaled if _STRICTNESS[journaled] > _STRICTNESS[current] else current


def _tool_error(exc: ToolError) -> tuple[str, str, Any]:
    return type(exc).__name__, str(exc), exc.data
