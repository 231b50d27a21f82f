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
    handle/<call>/<k>/<n>       the n-th step of attempt k's progress, journaled by the tool while
                                the attempt runs: how to find its effect again (an MCP task id,
                                an input round's request state), so a resume continues the
                                attempt through the tool's ``resume`` instead of halting; or, if
                                ``in_flight``, that a further request is about to leave (a
                                marker of its own: until the next step the outcome is unknown)
    decision/<call>/<digest>    an approval decision as submitted (counted or not); identical
                                resubmissions share a key, so they are no-ops
    tally/<call>/<policy>       the gate's terminal tally under one policy, before the tool runs
    interrupt/<call>/<key>      a tool's question to a person
    answer/<call>/<key>         the answer to it
    wait/<call>/<n>             the n-th wait of a call's tool (``ToolContext.sleep``, ``receive``):
                                what it waits for and when it is due, on the journal's clock
    received/<call>/<n>         what the n-th wait, a receive, was given: a signal, or its timeout
    signal/<name>/<id>          a named message sent to the run (``Journal.signal``), waiting in
                                its mailbox until a receive takes it; one per id
    cancel                      a cancel request
    stop/<turns>/<reason>       a drive stopped short of an end (max_turns, the model unavailable)
    history/<last>              the settled turns since the previous chunk, up to turn <last>, as
                                the model saw them (``runtime.history``): derived from the records
                                before it, so that a drive resumes without replaying them
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
    "HISTORY",
    "INTERRUPT",
    "LATE",
    "RECEIVED",
    "RECONCILE",
    "RESULT",
    "SIGNAL",
    "START",
    "STOP",
    "TALLY",
    "TURN",
    "WAIT",
    "Appended",
    "Entry",
    "Handle",
    "Outcome",
    "Record",
    "answer_key",
    "attempt_key",
    "decision_key",
    "halt_key",
    "handle_key",
    "history_key",
    "interrupt_key",
    "late_key",
    "received_key",
    "reconcile_key",
    "result_key",
    "signal_key",
    "signal_prefix",
    "stop_key",
    "tally_key",
    "turn_key",
    "wait_key",
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
WAIT = "wait"
RECEIVED = "received"
SIGNAL = "signal"
CANCEL = "cancel"
HALT = "halt"
HANDLE = "handle"
STOP = "stop"
RECONCILE = "reconcile"
HISTORY = "history"
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


def handle_key(call_id: str, attempt: int, n: int) -> str:
    return f"handle/{call_id}/{attempt}/{n}"


def reconcile_key(call_id: str, attempt: int, n: int) -> str:
    """The ``n``-th inconclusive reconciler try on an attempt (a conclusion is its result)."""
    return f"reconcile/{call_id}/{attempt}/{n}"


def history_key(last: int) -> str:
    """The chunk of history that ends with turn ``last`` (zero-padded: keys sort as turns do)."""
    return f"history/{last:010d}"


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


def wait_key(call_id: str, n: int) -> str:
    return f"wait/{call_id}/{n}"


def received_key(call_id: str, n: int) -> str:
    return f"received/{call_id}/{n}"


def signal_prefix(name: str) -> str:
    """The keys of the signals named ``name`` (a name holds no ``/``)."""
    return f"signal/{name}/"


def signal_key(name: str, signal_id: str) -> str:
    return f"{signal_prefix(name)}{signal_id}"


def error_payload(kind: str, message: str, data: Any = None) -> dict[str, Any]:
    """How an error result is recorded (and shown to the model)."""
    payload: dict[str, Any] = {"type": kind, "message": message}
    if data is not None:
        payload["data"] = data
    return payload


@dataclass(frozen=True, slots=True)
class Handle:
    """One step of a side effect's progress, journaled mid-attempt (``ToolContext.record_handle``).

    The payload of a ``handle/<call>/<k>/<n>`` record, ``n`` counting from 1 within attempt
    ``k``; the latest step decides what a resume does. ``value`` is the tool's own JSON (an MCP
    tool journals ``{"mcp_task": <task id>, "server": <name>}`` for a task); the runtime never
    reads inside it. A step that is not ``in_flight`` says the effect can be asked about or
    continued, so the attempt's outcome is knowable: a resume gives the value to the tool's
    ``resume`` instead of halting (a build whose tool cannot resume halts). An ``in_flight``
    step says a further request of the attempt is about to leave: like the attempt marker, it
    makes the outcome unknown until a later step or the result, and a resume halts on it.
    """

    call_id: str
    attempt: int
    n: int
    tool: str
    value: Any
    in_flight: bool = False

    def to_payload(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "attempt": self.attempt,
            "n": self.n,
            "tool": self.tool,
            "handle": self.value,
            "in_flight": self.in_flight,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> Handle:
        return cls(
            call_id=str(payload["call_id"]),
            attempt=int(payload["attempt"]),
            n=int(payload.get("n", 1)),
            tool=str(payload.get("tool", "")),
            value=payload.get("handle"),
            in_flight=payload.get("in_flight") is True,
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
class Entry:
    """A record to be written: the store gives it its ``seq`` and time when it commits."""

    key: str
    kind: str
    payload: Any


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
    before: tuple[Record, ...] = ()
    """The records the append was given to write first (``Store.append(before=)``), as
    committed with it; empty when it was refused."""
    released: bool = False
    """Whether the run's lease was released in the same transaction (``Store.append(release=
    True)``): the append committed (not refused), so the lease it was fenced by is free."""
