"""What a reconciler is given (``Attempt``) and what it may say (``Found``, ``Absent``,
``Unknown``); what one try concluded (``Verdict``); and when an *absent* may settle a call.
``runtime.reconcile`` runs reconcilers on halted calls, and re-exports these names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runtime.state import CallState
from runtime.tools import Tool, ToolContext

__all__ = [
    "BACKOFF",
    "RECONCILE_TIMEOUT",
    "Absent",
    "Attempt",
    "Found",
    "Reconciler",
    "Unknown",
    "Verdict",
    "reconciler_of",
    "settle_seconds",
    "settles_at_ms",
]

RECONCILE_TIMEOUT = 30.0
"""Seconds one look-up may take; past it the reconciler said *unknown*."""

BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds until the next try after an inconclusive one (the last repeats)."""


@dataclass(frozen=True, slots=True)
class Found:
    """The effect happened: ``value`` is the result the model will see."""

    value: Any
    evidence: str


@dataclass(frozen=True, slots=True)
class Absent:
    """The effect did not happen, as far as the lookup can tell now."""

    evidence: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """The lookup cannot tell (the provider is down, the record is ambiguous)."""

    why: str


@dataclass(frozen=True, slots=True)
class Attempt:
    """What a reconciler is given: the halted call and its attempt."""

    run_id: str
    call_id: str
    tool: str
    arguments: Any
    idempotency_key: str
    attempted_at_ms: int
    """When the attempt's marker was committed (wall-clock epoch milliseconds, to show)."""
    attempt: int
    context: ToolContext


Reconciler = Callable[[Attempt], Awaitable[Found | Absent | Unknown]]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one try concluded: a resolution to journal, or why the call stays halted."""

    reconciler: str
    said: str
    """``found``, ``absent`` or ``unknown``."""
    detail: str
    """The evidence (found, absent) or why (unknown)."""
    outcome: str | None = None
    """``value`` or ``not_executed`` when it settles the call; None when it stays halted."""
    value: Any = None
    waiting: str | None = None
    """Why an *absent* does not settle yet."""
    next_try_ms: int | None = None
    """When to try again, on the journal's clock (``Store.clock_ms``)."""
    retry_in_ms: int | None = None
    """The same, as a wait from the try: with the try record's time, what people are shown."""

    @property
    def by(self) -> str:
        return f"reconciler {self.reconciler}"

    def brief(self) -> str:
        """``find_charge said unknown: provider timeout``."""
        text = f"{self.reconciler} said {self.said}: {self.detail}"
        return f"{text} ({self.waiting})" if self.waiting else text

    def to_json(self, call: CallState) -> dict[str, Any]:
        """The record of an inconclusive try (``reconcile/<call>/<k>/<n>``)."""
        return {
            "call_id": call.call.id,
            "attempt": call.attempt,
            "reconciler": self.reconciler,
            "said": self.said,
            "detail": self.detail,
            "waiting": self.waiting,
            "next_try_ms": self.next_try_ms,
            "retry_in_ms": self.retry_in_ms,
        }


def reconciler_of(tool: Tool | None) -> Reconciler | None:
    spec = getattr(tool, "spec", None)
    found = getattr(spec, "reconcile", None)
    return found if callable(found) else None


def settle_seconds(tool: Tool) -> float | None:
    """The settle time the tool declares (``settle=``), or None: then no *absent* settles it.

    Not its timeout: a timeout bounds how long bide waits for an answer, not how long the
    provider may take to act on the request."""
    settle = getattr(tool.spec, "settle", None)
    return None if settle is None else float(settle)


def settles_at_ms(lease_end_ms: int, settle: float) -> int:
    """When an *absent* may settle an attempt: ``settle`` seconds after the end of the lease
    under which it was sent, on the journal's clock. The lease's end is the latest moment the
    effect could have left (its marker was written before, and the owner sends nothing past its
    lease); the settle time is what the provider may take after that."""
    return lease_end_ms + round(settle * 1000)
