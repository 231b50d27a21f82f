"""The records of a run: their keys, kinds, the Record itself, and payload helpers. Pure data.

One run's keys (insert-if-absent, so of two drivers writing one key exactly one wins):

    header                      format version (written by the store)
    start                       input, agent, spec, settings
    turn/<n>                    the model's n-th turn (text, tool calls, usage, finish reason)
    attempt/<call>/<k>          a side effect's k-th attempt is about to leave the process
    result/<call>/<k>           the outcome of attempt k: a value, an error, or a resolution
    late/<call>/<k>             a result that arrived after attempt k was resolved "not executed"
                                (or after the run ended)
    halt/<call>/<k>             why this drive halted on attempt k (the exception), as evidence
    handle/<call>/<k>           how to find attempt k's effect again, journaled by the tool while
                                the attempt runs (an MCP task id): a resume continues the attempt
                                through the tool's ``resume`` instead of halting on it
    decision/<call>/<digest>    an approval decision as submitted (counted or not); identical
                                resubmissions share a key, so they are no-ops
    tally/<call>/<policy>       the gate's terminal tally under one policy, before the tool runs
    interrupt/<call>/<key>      a tool's question to a person
    answer/<call>/<key>         the answer to it
    cancel                      a cancel request
    stop/<turns>/<reason>       a drive stopped short of an end (max_turns, the model unavailable)
    end                         the run's end: completed, failed or cancelled
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ANSWER",
    "ATTEMPT",
    "CANCEL",
    "CODEC",
    "DECISION",
    "END",
    "HALT",
    "HANDLE",
    "INTERRUPT",
    "LATE",
    "RECONCILE",
    "RESULT",
    "START",
    "STOP",
    "TALLY",
    "TURN",
    "Appended",
    "Handle",
    "Outcome",
    "Record",
    "answer_key",
    "attempt_key",
    "decision_key",
    "halt_key",
    "handle_key",
    "interrupt_key",
    "late_key",
    "reconcile_key",
    "result_key",
    "stop_key",
    "tally_key",
    "turn_key",
]

CODEC = "json"
"""The codec of every payload this bide writes: compact UTF-8 JSON, NaN refused."""

START = "start"
TURN = "turn"
ATTEMPT = "attempt"
RESULT = "result"
LATE = "late"
DECISION = "decision"
TALLY = "tally"
INTERRUPT = "interrupt"
ANSWER = "answer"
CANCEL = "cancel"
HALT = "halt"
HANDLE = "handle"
STOP = "stop"
RECONCILE = "reconcile"
END = "end"

Outcome = Literal["value", "error", "not_executed"]


def turn_key(n: int) -> str:
    return f"turn/{n}"


def attempt_key(call_id: str, attempt: int) -> str:
    return f"attempt/{call_id}/{attempt}"


def result_key(call_id: str, attempt: int) -> str:
    return f"result/{call_id}/{attempt}"


def late_key(call_id: str, attempt: int) -> str:
    return f"late/{call_id}/{attempt}"


def halt_key(call_id: str, attempt: int) -> str:
    return f"halt/{call_id}/{attempt}"


def handle_key(call_id: str, attempt: int) -> str:
    return f"handle/{call_id}/{attempt}"


def reconcile_key(call_id: str, attempt: int, n: int) -> str:
    """The ``n``-th inconclusive reconciler try on an attempt (a conclusion is its result)."""
    return f"reconcile/{call_id}/{attempt}/{n}"


def stop_key(turns: int, reason: str) -> str:
    return f"stop/{turns}/{reason}"


def decision_key(call_id: str, fingerprint: str) -> str:
    return f"decision/{call_id}/{fingerprint}"


def tally_key(call_id: str, policy_digest: str) -> str:
    return f"tally/{call_id}/{policy_digest[:16]}"


def interrupt_key(call_id: str, key: str) -> str:
    return f"interrupt/{call_id}/{key}"


def answer_key(call_id: str, key: str) -> str:
    return f"answer/{call_id}/{key}"


def error_payload(kind: str, message: str, data: Any = None) -> dict[str, Any]:
    """How an error result is recorded (and shown to the model)."""
    payload: dict[str, Any] = {"type": kind, "message": message}
    if data is not None:
        payload["data"] = data
    return payload


@dataclass(frozen=True, slots=True)
class Handle:
    """What a side effect journaled, mid-attempt, to find its effect again after a crash.

    The payload of a ``handle/<call>/<k>`` record. ``value`` is the tool's own JSON (an MCP tool
    journals ``{"mcp_task": <task id>, "server": <name>}``); the runtime never reads inside it.
    Its meaning: the effect was accepted and can be asked about, so the attempt's outcome is
    knowable. A resume gives it to the tool's ``resume`` instead of halting; a build whose tool
    cannot resume halts as for any attempt without a result.
    """

    call_id: str
    attempt: int
    tool: str
    value: Any

    def to_payload(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "attempt": self.attempt,
            "tool": self.tool,
            "handle": self.value,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> Handle:
        return cls(
            call_id=str(payload["call_id"]),
            attempt=int(payload["attempt"]),
            tool=str(payload.get("tool", "")),
            value=payload.get("handle"),
        )


@dataclass(frozen=True, slots=True)
class Record:
    """One journal record. ``seq`` is its position in commit order across the whole file."""

    seq: int
    run_id: str
    key: str
    kind: str
    payload: Any
    created_ms: int
    codec: str = CODEC


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append did: whether this caller's record won, and the record that is there."""

    won: bool
    record: Record | None
    """The winning record; ``None`` when the append was refused by its ``unless`` guard."""
    watched: bool = False
    """Whether a record under the append's ``watch`` key existed when it committed."""
    refused_by: str | None = None
    """The ``unless`` key whose record refused the append, if one did."""
