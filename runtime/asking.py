"""A person in a call: the approval gate a call must pass, and the questions a tool asks.

Both pause the run as ``Waiting`` until a person's decision or answer is journaled
(``Journal.decide``, ``Journal.answer``); the next drive reads it back from the journal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime import records as R
from runtime import tracing
from runtime.approval import ApprovalPolicy, tally
from runtime.drive import Drive, Misuse
from runtime.errors import ConfigError, ToolError
from runtime.jsontext import unstorable_text
from runtime.logs import get_logger
from runtime.result import Waiting
from runtime.state import CallState
from runtime.tools import Interrupted, Safety, Tool
from runtime.waits import Waiter

__all__ = ["PROCEED", "Denied", "Proceed", "gate", "interrupter", "policies"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Proceed:
    """A gate let the call through."""


PROCEED = Proceed()


@dataclass(frozen=True, slots=True)
class Denied:
    """A gate denied the call: ``reason`` becomes its error result."""

    reason: str


async def gate(drive: Drive, cs: CallState, policy: ApprovalPolicy) -> Proceed | Denied | Waiting:
    """Pause a gated call until ``policy`` is decided (journaling the terminal tally before the
    tool runs); a denial is for the caller to record as the call's result."""
    call = cs.call
    recorded = cs.tallies.get(policy.digest)
    replayed = recorded is not None
    if recorded is None:
        count = tally(
            policy,
            cs.decisions_made(),
            run_id=drive.run_id,
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
        appended = await drive.append(
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
        return Denied(f"{call.name} was not approved ({who})")
    return PROCEED


def interrupter(drive: Drive, cs: CallState, safety: Safety) -> Callable[..., Awaitable[Any]]:
    """The call's ``ToolContext.interrupt``: journal a question and pause the run, or return
    the journaled answer once a person gave it."""
    return _Interrupter(drive, cs, safety)


class _Interrupter:
    """``interrupter``'s callable: one object per call, where a closure would be a function
    and a cell per name it captures, each walked by the cyclic collector while calls run."""

    __slots__ = ("cs", "drive", "safety")

    def __init__(self, drive: Drive, cs: CallState, safety: Safety):
        self.drive = drive
        self.cs = cs
        self.safety = safety

    def waiter(self) -> Waiter:
        """The call's waits (``ToolContext.sleep``, ``receive``), made only for a tool that
        waits: one object fewer per call for the cyclic collector."""
        return Waiter(self.drive, self.cs, self.safety)

    async def __call__(
        self, key: str, prompt: str, *, expect: Any = str, schema: Mapping[str, Any] | None = None
    ) -> Any:
        drive, cs = self.drive, self.cs
        call = cs.call
        if self.safety is Safety.SIDE_EFFECT and not cs.resumable:
            # A side effect that journaled a handle is continued, never re-run, once
            # answered: only then may it ask.
            raise Misuse(
                ConfigError(
                    f"tool {call.name} is a SIDE_EFFECT and called interrupt(): only READ_ONLY"
                    " and IDEMPOTENT tools may, since the tool runs again once answered",
                    run_id=drive.run_id,
                    call_id=call.id,
                )
            )
        if (
            not isinstance(key, str)
            or not key
            or len(key) > 128
            or unstorable_text(key) is not None
        ):
            raise Misuse(
                ConfigError(f"interrupt key must be 1 to 128 characters, without NUL: {key!r}")
            )
        import pydantic  # only a tool that asks needs it

        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(expect)
        answer = cs.answers.get(key)
        if answer is not None:
            try:
                return adapter.validate_python(answer.payload["value"])
            except pydantic.ValidationError as exc:
                raise ToolError(f"the answer to {key!r} does not fit: {exc}") from exc
        wanted = dict(schema) if schema is not None else adapter.json_schema()
        await drive.append(
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


def policies(plan: Mapping[str, Any], tool: Tool) -> list[ApprovalPolicy]:
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
