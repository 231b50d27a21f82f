"""Retrying model turns: full-jitter exponential backoff that defers to a ``Retry-After``.

The provider SDKs' own retries are switched off, so every retry happens here, visibly and by one
policy. Retrying a model request is always safe for bide: a turn is journaled only once it is
returned, and nothing about a failed request is ever returned as a turn.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from runtime.errors import ConfigError, ModelError
from runtime.messages import AssistantTurn, Message
from runtime.model import Model
from runtime.tools import ToolSpec

__all__ = ["ModelRetry", "RetryingModel"]

log = structlog.get_logger(__name__)

_shared_random = random.Random()


@dataclass(frozen=True, slots=True)
class ModelRetry:
    """How often and how patiently to retry a retryable ``ModelError``.

    ``max_attempts`` counts the first request too (1 means never retry). Without a server hint,
    the wait before retry *n* is uniform in ``[0, min(maximum, initial * multiplier**(n-1))]``
    ("full jitter", so that many runs hit by one outage do not come back in step). A server's
    ``Retry-After`` is waited exactly instead, unless it exceeds ``max_retry_after``: then the
    error is raised at once, since sleeping for an hour inside one model call helps nobody and the
    run can simply be driven again later.
    """

    max_attempts: int = 5
    initial: float = 1.0
    maximum: float = 60.0
    multiplier: float = 2.0
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError("ModelRetry.max_attempts must be an integer")
        if self.max_attempts < 1:
            raise ConfigError("ModelRetry.max_attempts must be at least 1")
        for name in ("initial", "maximum", "max_retry_after"):
            if not _finite_at_least(getattr(self, name), 0.0):
                raise ConfigError(f"ModelRetry.{name} must be a finite number of seconds >= 0")
        if not _finite_at_least(self.multiplier, 1.0):
            raise ConfigError("ModelRetry.multiplier must be a finite number >= 1")
        if self.initial > self.maximum:
            raise ConfigError("ModelRetry.initial must not exceed ModelRetry.maximum")

    def delay(
        self, attempt: int, error: ModelError, rng: random.Random | None = None
    ) -> float | None:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), or None to give up.

        Gives up when the error is not retryable, when ``attempt`` was the last one allowed, or
        when the server asks for a longer wait than ``max_retry_after``.
        """
        if not error.retryable or attempt >= self.max_attempts:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            return max(0.0, error.retry_after)
        return (rng or _shared_random).uniform(0.0, self.ceiling(attempt))

    def ceiling(self, attempt: int) -> float:
        """The longest backoff after failed attempt ``attempt``: the jitter's upper bound."""
        try:
            grown = self.initial * self.multiplier ** max(0, attempt - 1)
        except OverflowError:
            return self.maximum
        return min(self.maximum, grown)


def _finite_at_least(value: object, low: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= low
    )


class RetryingModel:
    """A ``Model`` that retries another one's retryable ``ModelError``s under a ``ModelRetry``.

    ``sleep`` and ``rng`` exist for tests (and for callers with their own clock); cancellation
    during a wait propagates at once. Errors that are not ``ModelError`` are never caught.
    """

    def __init__(
        self,
        model: Model,
        retry: ModelRetry | None = None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ):
        if not isinstance(model, Model):
            raise ConfigError(f"RetryingModel needs a Model, got {model!r}")
        self.model = model
        self.retry = retry if retry is not None else ModelRetry()
        if not isinstance(self.retry, ModelRetry):
            raise ConfigError(f"RetryingModel needs a ModelRetry, got {retry!r}")
        self._sleep = sleep
        self._rng = rng

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        attempt = 1
        while True:
            try:
                return await self.model.complete(system_prompt, messages, tools)
            except ModelError as exc:
                wait = self.retry.delay(attempt, exc, self._rng)
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
            await self._sleep(wait)
            attempt += 1

    def __repr__(self) -> str:
        return f"RetryingModel({self.model!r}, {self.retry!r})"
