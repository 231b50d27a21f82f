"""Retries of what is safe to retry: backoff with full jitter that defers to a Retry-After.

The loop retries READ_ONLY and IDEMPOTENT tool calls (``Agent(tool_retry=...)``) and model
requests (``Agent(model_retry=...)``; a turn is journaled only once it is returned, so a retried
request can never duplicate a recorded one). Provider SDKs' own retries are switched off so that
every retry happens here, visibly and under one policy.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime import tracing
from runtime.errors import ConfigError, ModelError
from runtime.logs import get_logger
from runtime.messages import AssistantTurn, Message
from runtime.model import Model
from runtime.tools import ToolSpec

__all__ = ["RetryPolicy", "RetryingModel"]

log = get_logger(__name__)

_shared_random = random.Random()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry.

    ``max_attempts`` counts the first try (1 means never retry). Without a server hint, the wait
    after failed attempt *n* is uniform in ``[0, min(max_delay, initial_delay *
    multiplier**(n-1))]`` ("full jitter": many runs hit by one outage do not come back in step).
    A server's Retry-After is waited exactly instead, unless it exceeds ``max_retry_after``: then
    retrying stops at once, since the run can simply be driven again later.
    """

    max_attempts: int = 3
    initial_delay: float = 0.2
    max_delay: float = 20.0
    multiplier: float = 2.0
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError("RetryPolicy.max_attempts must be an integer")
        if self.max_attempts < 1:
            raise ConfigError("RetryPolicy.max_attempts must be at least 1")
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            if not _finite_at_least(getattr(self, name), 0.0):
                raise ConfigError(f"RetryPolicy.{name} must be a finite number of seconds >= 0")
        if not _finite_at_least(self.multiplier, 1.0):
            raise ConfigError("RetryPolicy.multiplier must be a finite number >= 1")
        if self.initial_delay > self.max_delay:
            raise ConfigError("RetryPolicy.initial_delay must not exceed max_delay")

    def delay(
        self,
        attempt: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None to give up."""
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return max(0.0, retry_after)
        return (rng or _shared_random).uniform(0.0, self.ceiling(attempt))

    def ceiling(self, attempt: int) -> float:
        """The longest backoff after failed attempt ``attempt``: the jitter's upper bound."""
        try:
            grown = self.initial_delay * self.multiplier ** max(0, attempt - 1)
        except OverflowError:
            return self.max_delay
        return min(self.max_delay, grown)


def _finite_at_least(value: object, low: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= low
    )


MODEL_RETRY = RetryPolicy(max_attempts=5, initial_delay=1.0, max_delay=60.0)
"""The default for model requests."""
TOOL_RETRY = RetryPolicy()
"""The default for READ_ONLY and IDEMPOTENT tool calls."""


class RetryingModel:
    """A Model that retries another one's retryable ``ModelError``s under a RetryPolicy.

    The Agent wraps its model in one. ``sleep`` and ``rng`` exist for tests; cancellation during a
    wait propagates at once; errors that are not ``ModelError`` are never caught.
    """

    def __init__(
        self,
        model: Model,
        retry: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ):
        if not isinstance(model, Model):
            raise ConfigError(f"RetryingModel needs a Model, got {model!r}")
        self.model = model
        self.retry = retry if retry is not None else MODEL_RETRY
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigError(f"RetryingModel needs a RetryPolicy, got {retry!r}")
        self._sleep = sleep
        self._rng = rng

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: Any = None,
    ) -> AssistantTurn:
        """``output``: the ``runtime.output.OutputSpec`` to pass on (only a model that
        accepts it is given one)."""
        options = {} if output is None else {"output": output}
        attempt = 1
        while True:
            try:
                return await self.model.complete(system_prompt, messages, tools, **options)
            except ModelError as exc:
                wait = (
                    self.retry.delay(attempt, retry_after=exc.retry_after, rng=self._rng)
                    if exc.retryable
                    else None
                )
                if wait is None:
                    raise
                log.info(
                    "model_retry",
                    attempt=attempt,
                    delay=round(wait, 3),
                    status_code=exc.status_code,
                    retry_after=exc.retry_after,
                    error=exc.message,
                )
                tracing.model_retry(attempt, wait, exc.status_code, exc.retry_after)
            await self._sleep(wait)
            attempt += 1

    def __repr__(self) -> str:
        return f"RetryingModel({self.model!r}, {self.retry!r})"
