"""One tool call, from its plan to a typed outcome: recorded, halted, waiting or cancelled.

The call-level rules of ``docs/guarantee.md`` (the gate, the attempt marker, the invocation, the
retry of a retry-safe call, the result that must not be lost, the halt and its reconciler) live
here and nowhere else. A call sees its drive only through ``Drive``: the run's identity, the
agent's tools, the lease, and the one way to append.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pydantic

from runtime import faults, tracing
from runtime import records as R
from runtime.approval import ApprovalPolicy, tally
from runtime.errors import ConfigError, StorageError, ToolError, ToolOutcomeUnknown
from runtime.journal.codec import unstorable
from runtime.journal.resolution import Resolution, resolution_payload
from runtime.logs import get_logger
from runtime.ownership import Holding
from runtime.reconcile import Verdict, consult, reconciler_of, try_key
from runtime.records import Appended
from runtime.redact import clean
from runtime.result import Halt, Waiting
from runtime.retry import RetryPolicy
from runtime.state import CallState
from runtime.tools import (
    Interrupted,
    Safety,
    Tool,
    ToolContext,
    enforces_timeout,
    handle_canceller,
    idempotency_key_for,
    resumer,
)

__all__ = [
    "CANCELLED",
    "RECORDED",
    "RESULT_COMMIT_RETRY",
    "Calls",
    "Cancelled",
    "Drive",
    "Misuse",
    "Outcome",
    "Recorded",
    "RunEnded",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Recorded:
    """The call's outcome is in the journal: a result, an error result, or a resolution."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A cancel request was seen before the call started: it never ran."""


@dataclass(frozen=True, slots=True)
class _Proceed:
    """A gate let the call through."""


RECORDED = Recorded()
CANCELLED = Cancelled()
PROCEED = _Proceed()

Outcome = Recorded | Halt | Waiting | Cancelled
"""What one call came to. A halt and a wait stop the run; the others let it go on."""


class RunEnded(Exception):
    """An append was refused because the run has an end record (another driver ended it)."""


class Misuse(BaseException):
    """A tool broke a rule of the drive (a SIDE_EFFECT called ``interrupt()``): its ConfigError
    stops the drive. A BaseException, so that a tool's ``except Exception`` cannot swallow it."""

    def __init__(self, error: ConfigError):
        super().__init__(str(error))
        self.error = error


class AgentTools(Protocol):
    """What a call needs of its agent."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    @property
    def tool_retry(self) -> RetryPolicy: ...

    def validate_arguments(self, tool: str, arguments: Any) -> str | None: ...


class Drive(Protocol):
    """What a call sees of the drive it runs in."""

    run_id: str
    key_scheme: int
    holding: Holding
    executed: int
    """How many tool invocations this drive made (a call adds its own)."""

    @property
    def agent(self) -> AgentTools: ...

    def cancelled(self) -> bool: ...

    async def append(
        self,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        after_end: bool = False,
    ) -> Appended: ...


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
            verdict = await self._reconcile(cs, owner_gone=True)
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
        for policy in _policies(cs.plan, tool):
            gate = await self._gate(cs, k, safety, policy)
            if not isinstance(gate, _Proceed):
                return gate
        if self.drive.cancelled():
            return CANCELLED
        context = self._context(cs, k, safety)
        try:
            if safety is Safety.SIDE_EFFECT:
                return await self._side_effect(cs, k, tool, context)
            return await self._retry_safe(cs, k, tool, context)
        except Interrupted as paused:
            log.info("run_waiting", call_id=call.id, tool=call.name, kind="input")
            waiting: Waiting = paused.waiting
            return waiting
        except Misuse as misuse:
            raise misuse.error from None

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
            interrupt=self._interrupter(cs, safety),
            record_handle=self._handle_recorder(cs, k, safety),
        )

    def _handle_recorder(
        self, cs: CallState, k: int, safety: Safety
    ) -> Callable[..., Awaitable[bool]]:
        call = cs.call

        async def record_handle(value: Any, *, in_flight: bool = False) -> bool:
            if safety is not Safety.SIDE_EFFECT:
                return False  # a retry-safe call runs again after a crash: no handle needed
            problem = unstorable(value, name="handle")
            if problem is not None:
                raise Misuse(
                    ConfigError(
                        f"tool {call.name} journaled a handle that cannot be stored: {problem}",
                        run_id=self.drive.run_id,
                        call_id=call.id,
                    )
                )
            n = max(cs.handles.get(k, {}), default=0) + 1
            handle = R.Handle(
                call_id=call.id, attempt=k, n=n, tool=call.name, value=value, in_flight=in_flight
            )
            # Evidence of what the effect did, so kept whatever happened to the run meanwhile.
            appended = await self.drive.append(
                R.handle_key(call.id, k, n), R.HANDLE, handle.to_payload(), after_end=True
            )
            if not appended.won:
                # Another writer journaled this step: nothing more may leave from here.
                raise ToolOutcomeUnknown(
                    f"{call.name}: step {n} of attempt {k} was journaled by another driver",
                    run_id=self.drive.run_id,
                    call_id=call.id,
                )
            log.info(
                "tool_handle_recorded",
                call_id=call.id,
                tool=call.name,
                attempt=k,
                step=n,
                in_flight=in_flight,
            )
            return True

        return record_handle

    async def _gate(
        self, cs: CallState, k: int, safety: Safety, policy: ApprovalPolicy
    ) -> _Proceed | Recorded | Waiting:
        """Pause a gated call until its policy is decided; record a denial as its result."""
        call = cs.call
        recorded = cs.tallies.get(policy.digest)
        replayed = recorded is not None
        if recorded is None:
            count = tally(
                policy,
                cs.decisions_made(),
                run_id=self.drive.run_id,
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
            )
            if count.outcome == "pending":
                log.info("run_waiting", call_id=call.id, tool=call.name, kind="approval")
                return Waiting(
                    kind="approval",
                    call_id=call.id,
                    tool=call.name,
                    arguments=call.arguments,
                    policy=policy.to_json(),
                    tally=count.to_json(),
                )
            # The terminal tally is journaled before the tool runs; a resume reuses it.
            appended = await self.drive.append(
                R.tally_key(call.id, policy.digest),
                R.TALLY,
                {"call_id": call.id, "policy": policy.digest, "tally": count.to_json()},
            )
            assert appended.record is not None
            recorded = appended.record
            log.info("approval_decided", call_id=call.id, outcome=count.outcome)
        outcome = recorded.payload["tally"]
        tracing.approval_decided(str(outcome["outcome"]), replayed=replayed)
        if outcome["outcome"] == "denied":
            who = ", ".join(outcome.get("denials") or ()) or "the approvers"
            await self._record(
                cs, k, safety, error=("approval_denied", f"{call.name} was not approved ({who})")
            )
            return RECORDED
        return PROCEED

    def _interrupter(self, cs: CallState, safety: Safety) -> Callable[..., Awaitable[Any]]:
        call = cs.call

        async def interrupt(
            key: str, prompt: str, *, expect: Any = str, schema: Mapping[str, Any] | None = None
        ) -> Any:
            if safety is Safety.SIDE_EFFECT and not cs.resumable:
                # A side effect that journaled a handle is continued, never re-run, once
                # answered: only then may it ask.
                raise Misuse(
                    ConfigError(
                        f"tool {call.name} is a SIDE_EFFECT and called interrupt(): only READ_ONLY"
                        " and IDEMPOTENT tools may, since the tool runs again once answered",
                        run_id=self.drive.run_id,
                        call_id=call.id,
                    )
                )
            if not isinstance(key, str) or not key or len(key) > 128:
                raise Misuse(ConfigError(f"interrupt key must be 1 to 128 characters: {key!r}"))
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(expect)
            answer = cs.answers.get(key)
            if answer is not None:
                try:
                    return adapter.validate_python(answer.payload["value"])
                except pydantic.ValidationError as exc:
                    raise ToolError(f"the answer to {key!r} does not fit: {exc}") from exc
            wanted = dict(schema) if schema is not None else adapter.json_schema()
            await self.drive.append(
                R.interrupt_key(call.id, key),
                R.INTERRUPT,
                {"call_id": call.id, "key": key, "prompt": prompt, "schema": wanted},
            )
            raise Interrupted(
                Waiting(
                    kind="input",
                    call_id=call.id,
                    tool=call.name,
                    arguments=call.arguments,
                    prompt=prompt,
                    key=key,
                    schema=wanted,
                )
            )

        return interrupt

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
        self.drive.holding.check()  # a drive whose lease was taken over resumes nothing
        return await self._settle(
            cs, k, tool, context, self._bounded(tool, resume(handle.value, call.arguments, context))
        )

    async def cancel_handles(self, pending: list[CallState]) -> None:
        """The run is being cancelled: ask each tool with a journaled handle and no result to
        stop its effect (an MCP tool sends ``tasks/cancel``). Best effort and journaled by
        nothing: a cancel does not prove the work never ran, so the call stays unresolved."""
        for cs in pending:
            handle = cs.handle if cs.result is None else None
            tool = self.drive.agent.tools.get(cs.call.name)
            cancel = handle_canceller(tool) if handle is not None and tool is not None else None
            if handle is None or tool is None or cancel is None:
                continue
            context = self._context(cs, cs.attempt, Safety.SIDE_EFFECT)
            try:
                async with asyncio.timeout(tool.spec.timeout or HANDLE_CANCEL_TIMEOUT):
                    await cancel(handle.value, context)
            except Exception as exc:
                log.warning(
                    "tool_cancel_failed", call_id=cs.call.id, tool=cs.call.name, error=repr(exc)
                )
                continue
            log.warning(
                "tool_cancel_requested",
                call_id=cs.call.id,
                tool=cs.call.name,
                note="a cancel does not prove the work never ran; the call stays unresolved",
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
        attempt = 0
        while True:
            attempt += 1
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
        self.drive.holding.check()  # a drive whose lease was taken over runs no further tool
        return await self._bounded(tool, tool.call(arguments, context))

    async def _bounded(self, tool: Tool, running: Awaitable[Any]) -> Any:
        timeout = tool.spec.timeout
        # A tool that enforces its spec's timeout itself (an MCP tool) keeps an answer that is in
        # hand at the deadline; a second deadline here would cancel it first and lose the answer.
        if timeout is None or enforces_timeout(tool):
            return await running
        async with asyncio.timeout(timeout):
            return await running

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

    async def _reconcile(self, cs: CallState, *, owner_gone: bool) -> Verdict | None:
        """Ask the tool's reconciler about the halted attempt; journal what it concluded (a
        resolution, first-wins) or the inconclusive try. None if the tool has no reconciler."""
        tool = self.drive.agent.tools.get(cs.call.name)
        if tool is None or reconciler_of(tool) is None:
            return None
        verdict = await consult(
            tool, cs, self.drive.run_id, key_scheme=self.drive.key_scheme, owner_gone=owner_gone
        )
        if verdict is None:
            return None
        if verdict.outcome is None:
            await self.drive.append(try_key(cs), R.RECONCILE, verdict.to_json(cs), after_end=True)
            log.info("reconcile_tried", call_id=cs.call.id, said=verdict.brief())
            return verdict
        resolution = (
            Resolution.succeeded(verdict.value)
            if verdict.outcome == "value"
            else Resolution.not_executed()
        )
        payload = resolution_payload(cs, resolution, by=verdict.by, evidence=verdict.detail)
        payload["resolved"]["reconciler"] = verdict.reconciler
        appended = await self.drive.append(R.result_key(cs.call.id, cs.attempt), R.RESULT, payload)
        log.info(
            "call_reconciled",
            call_id=cs.call.id,
            said=verdict.said,
            reconciler=verdict.reconciler,
            won=appended.won,
        )
        return verdict

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
        verdict = await self._reconcile(cs, owner_gone=False)
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
        )
        log.warning("tool_halted", call_id=cs.call.id, tool=cs.call.name, cause=cause)
        return halt


HANDLE_CANCEL_TIMEOUT = 30.0
"""Seconds a tool without a timeout of its own gets to ask for a handle's effect to stop."""

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


def _policies(plan: Mapping[str, Any], tool: Tool) -> list[ApprovalPolicy]:
    """Every gate a call must pass: the one journaled with its turn (a build that dropped or
    loosened the gate never removes it), and the tool's own if it differs (a new gate binds)."""
    gates = []
    recorded = plan.get("approval")
    if recorded:
        gates.append(ApprovalPolicy.from_json(recorded))
    current = tool.spec.approval
    if isinstance(current, ApprovalPolicy) and all(g.digest != current.digest for g in gates):
        gates.append(current)
    return gates


def _tool_error(exc: ToolError) -> tuple[str, str, Any]:
    return type(exc).__name__, str(exc), exc.data
