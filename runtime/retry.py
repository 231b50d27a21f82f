"""RetryPolicy: exponential backoff with full jitter, honouring a server's Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass

from runtime.errors import ConfigError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and how long apart, to retry something that is safe to retry.

    Attempt ``n`` (1-based) that failed waits a uniformly random time up to
    ``min(max_delay, initial_delay * multiplier ** (n - 1))`` ("full jitter"), or exactly what
    the server asked for with Retry-After, before attempt ``n + 1``. ``max_attempts`` counts the
    first try: ``RetryPolicy(max_attempts=1)`` never retries.
    """

    max_attempts: int = 3
    initial_delay: float = 0.2
    max_delay: float = 20.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError("RetryPolicy.max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ConfigError("RetryPolicy delays must be >= 0 and multiplier >= 1")

    def delay(
        self,
        attempt: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds to wait after failed attempt ``attempt``; ``None`` when attempts are spent."""
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None and retry_after >= 0:
            return float(retry_after)
        cap = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return (rng or random).uniform(0, cap)


NO_RETRY = RetryPolicy(max_attempts=1)
