"""Usage limits: what a run may spend, counted from its journal.

``UsageLimits`` caps a run's model requests, tokens (input, output, total), tool calls and cost
(where the model reports it). A drive checks them before each model request and before the
calls of a turn run, and counts what the run's records say it spent: its recorded turns (each
answer retried for validation is one) and their usage, and the calls those turns asked for (a
call attempted again after a "not executed" resolution counts again). A resumed drive thus
continues the count of the drives before it. A run's child runs (``Agent.as_tool``) count toward
its limits as well, read from their own records: a parent checks what its tree spent, and a
child checks its parent's limits (and theirs, up the tree) with what the rest of the tree had
spent when it started. Going over a limit ends the run ``failed`` with a
cause naming the limit and the figures; a call already attempted is never abandoned silently:
it is recorded, or halts, first (``runtime.loop``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from runtime.errors import ConfigError
from runtime.messages import Usage
from runtime.output import OUTPUT_TOOL
from runtime.state import CallState, RunState

__all__ = ["NOTHING", "Outer", "Spent", "UsageLimits", "spent"]


@dataclass(frozen=True, slots=True)
class Spent:
    """What a run spent so far, by its records."""

    requests: int
    usage: Usage
    tool_calls: int

    def __add__(self, other: Spent) -> Spent:
        return Spent(
            self.requests + other.requests,
            self.usage + other.usage,
            self.tool_calls + other.tool_calls,
        )


NOTHING = Spent(0, Usage(), 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """The most a run may spend; ``None``: no limit on that measure."""

    requests: int | None = None
    """Model requests (recorded turns, validation retries included)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    """Tool calls run (each attempt of a call counts)."""
    cost: float | None = None
    """In the provider's currency, as the model reports it (a model that reports none spends
    nothing against this limit)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            number = int | float if f.name == "cost" else int
            if (
                isinstance(value, bool)
                or not isinstance(value, number)
                or value < 0
                or not math.isfinite(value)
            ):
                raise ConfigError(
                    f"UsageLimits.{f.name} must be a number >= 0 or None, not {value!r}"
                )

    def before_request(self, spent: Spent) -> str | None:
        """Why the next model request would go over a limit, or ``None``."""
        if self.requests is not None and spent.requests + 1 > self.requests:
            return (
                f"usage limit requests={self.requests} reached: {spent.requests} model "
                "requests made, the next would exceed it"
            )
        return self._tokens(spent)

    def check(self, spent: Spent, *, before_calls: bool) -> str | None:
        """``before_calls`` or ``before_request``."""
        return self.before_calls(spent) if before_calls else self.before_request(spent)

    def before_calls(self, spent: Spent) -> str | None:
        """Why running the calls of the last turn (counted in ``spent``) would go over a
        limit, or ``None``."""
        if self.tool_calls is not None and spent.tool_calls > self.tool_calls:
            return (
                f"usage limit tool_calls={self.tool_calls} exceeded: the model asked for "
                f"{spent.tool_calls} tool calls"
            )
        return self._tokens(spent)

    def _tokens(self, spent: Spent) -> str | None:
        usage = spent.usage
        for name, used in (
            ("input_tokens", usage.input_tokens),
            ("output_tokens", usage.output_tokens),
            ("total_tokens", usage.total_tokens),
        ):
            limit = getattr(self, name)
            if limit is not None and used > limit:
                return f"usage limit {name}={limit} exceeded: {used} used"
        if self.cost is not None and usage.cost is not None and usage.cost > self.cost:
            return f"usage limit cost={self.cost} exceeded: {usage.cost:g} spent"
        return None


@dataclass(frozen=True, slots=True)
class Outer:
    """The limits of a run above a child run (its parent, or further up), and what that run's
    tree spent outside this child when the child's drive started: the child's own spending is
    added to it before each of its model requests and calls (``runtime.children``)."""

    run_id: str
    limits: UsageLimits
    outside: Spent


def spent(state: RunState, *, output_calls: bool) -> Spent:
    """What the run folded in ``state`` spent. ``output_calls``: the agent answers through the
    output tool, whose calls the runtime settles itself (not counted as tool calls)."""
    calls = 0
    for turn in state.turns:
        calls += sum(not (output_calls and c.name == OUTPUT_TOOL) for c in turn.tool_calls)
    calls += sum(_again(cs) for cs in state.calls.values())
    return Spent(len(state.turns), state.usage, calls)


def _again(cs: CallState) -> int:
    """The attempts of a call after its first (each after a "not executed" resolution)."""
    return max(0, cs.attempt - 1)
