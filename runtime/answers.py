"""A drive's typed answers (``runtime.output``): the output calls the runtime settles itself,
and the verdict on a turn whose calls are all settled (the run's output, a failure, or ask
again). Used by ``runtime.loop`` only when the agent has an ``output_type`` or output tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime import records as R
from runtime.drive import DrivenAgent
from runtime.logs import get_logger
from runtime.output import OUTPUT_TOOL, Invalid, is_output_call, retries_used
from runtime.records import Appended
from runtime.redact import clean
from runtime.state import CallState, RunState
from runtime.tools import Safety

__all__ = ["AnswerDrive", "Answered", "Rejected", "settle", "verdict"]

log = get_logger(__name__)


class AnswerDrive(Protocol):
    """What settling answers needs of its drive (``runtime.loop.RunDrive`` is one)."""

    @property
    def agent(self) -> DrivenAgent: ...

    @property
    def state(self) -> RunState: ...

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
    ) -> Appended: ...


@dataclass(frozen=True, slots=True)
class Answered:
    """The run's output, as the JSON data its end record holds."""

    output: Any


@dataclass(frozen=True, slots=True)
class Rejected:
    """The run fails: its answers failed validation more often than allowed, or an output
    tool gave a value that is not of the output type."""

    error: str


async def settle(drive: AnswerDrive, pending: Sequence[CallState]) -> list[CallState]:
    """Record the results of the pending calls the runtime answers itself, and return the
    others (the tools to run): the output tool's call (validated, never run), and any output
    call after the turn's first (refused: a run's output is given once)."""
    agent, state = drive.agent, drive.state
    if not pending:
        return []
    turn = state.turns[pending[0].turn - 1]
    first = next((c.id for c in turn.tool_calls if is_output_call(c, agent.output_tools)), None)
    left = []
    for cs in pending:
        call = cs.call
        if first is None or not is_output_call(call, agent.output_tools):
            left.append(cs)
        elif call.id != first:
            await _record(
                drive,
                cs,
                error=(
                    "output_refused",
                    f"this turn already gave its answer in call {first}: a run's output is "
                    "given once, so this call was not run",
                ),
            )
        elif call.name == OUTPUT_TOOL and agent.output is not None:
            try:
                value = agent.output.validate_arguments(call.arguments)
            except Invalid as exc:
                log.info("output_invalid", call_id=call.id, error=str(exc))
                await _record(drive, cs, error=("invalid_output", str(exc)))
            else:
                await _record(drive, cs, value=agent.output.dump(value))
        else:
            left.append(cs)
    return left


async def _record(
    drive: AnswerDrive, cs: CallState, *, value: Any = None, error: tuple[str, str] | None = None
) -> None:
    call, k = cs.call, cs.attempt
    payload: dict[str, Any] = {
        "call_id": call.id,
        "attempt": k,
        "tool": call.name,
        "safety": Safety.READ_ONLY.value,
    }
    if error is None:
        payload["outcome"] = "value"
        payload["value"] = value
    else:
        payload["outcome"] = "error"
        payload["error"] = R.error_payload(error[0], clean(error[1]))
    await drive.append(R.result_key(call.id, k), R.RESULT, payload)


def verdict(agent: DrivenAgent, state: RunState) -> Answered | Rejected | None:
    """What the last turn, every call of it settled, means for the run: its output, a
    failure, or ``None`` (ask the model again)."""
    turn = state.turns[-1]
    if not turn.tool_calls:
        if agent.output is None:
            return Answered(turn.text)
        return Rejected(
            "the model answered with text and no output call, but the agent has an output type"
        )
    for call in turn.tool_calls:
        if not is_output_call(call, agent.output_tools):
            continue
        cs = state.calls.get(call.id)
        record = cs.result if cs is not None else None
        if record is None:
            return None
        payload = record.payload
        if payload.get("outcome") == "value":
            if call.name == OUTPUT_TOOL or agent.output is None:
                return Answered(payload.get("value"))
            try:
                value = agent.output.validate(payload.get("value"))
            except Invalid as exc:
                return Rejected(
                    f"output tool {call.name} returned a value that is not a "
                    f"{agent.output.spec.type_name}: {exc}"
                )
            return Answered(agent.output.dump(value))
        if call.name != OUTPUT_TOOL:
            return None  # the tool failed: the model sees its error, and goes on
        used = retries_used(state, agent.output_tools)
        if used > agent.output_retries:
            error = payload.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            return Rejected(
                f"the answer failed validation {used} times (output_retries="
                f"{agent.output_retries}); the last time: {message}"
            )
        return None  # the model is asked again: it sees the error as its retry prompt
    return None
