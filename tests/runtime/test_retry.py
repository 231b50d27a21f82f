"""RetryPolicy's arithmetic and RetryingModel's loop, without any network."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest

from runtime.errors import ConfigError, ModelError
from runtime.messages import AssistantTurn, Message, UserMessage
from runtime.retry import RetryingModel, RetryPolicy
from runtime.tools import ToolSpec

TRANSIENT = ModelError("overloaded", retryable=True, status_code=529)
FINAL = ModelError("bad request", retryable=False, status_code=400)


def test_backoff_ceiling_grows_by_the_multiplier_up_to_the_maximum() -> None:
    retry = RetryPolicy(max_attempts=100, initial_delay=0.5, max_delay=10.0, multiplier=3.0)
    assert [retry.ceiling(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert retry.ceiling(10_000) == 10.0  # no overflow however long the outage


def test_delay_is_full_jitter_below_the_ceiling_and_seeded_randomness_repeats() -> None:
    retry = RetryPolicy(max_attempts=10, initial_delay=1.0, max_delay=8.0)
    delays = [retry.delay(n, rng=random.Random(7)) for n in range(1, 6)]
    expected = [random.Random(7).uniform(0.0, retry.ceiling(n)) for n in range(1, 6)]
    assert delays == expected
    spread = {retry.delay(3, rng=random.Random(seed)) for seed in range(50)}
    assert all(d is not None and 0.0 <= d <= 4.0 for d in spread)
    assert len(spread) == 50  # jittered, not one fixed wait


def test_retry_after_is_waited_exactly_even_beyond_the_backoff_maximum() -> None:
    retry = RetryPolicy(max_attempts=3, max_delay=2.0, max_retry_after=60.0)
    hinted = ModelError("rate limited", retryable=True, retry_after=42.0, status_code=429)
    assert retry.delay(1, retry_after=hinted.retry_after, rng=random.Random(0)) == 42.0


def test_retry_after_longer_than_max_retry_after_gives_up() -> None:
    retry = RetryPolicy(max_attempts=3, max_retry_after=60.0)
    hinted = ModelError("rate limited", retryable=True, retry_after=61.0, status_code=429)
    assert retry.delay(1, retry_after=hinted.retry_after) is None


def test_the_last_attempt_gives_up() -> None:
    retry = RetryPolicy(max_attempts=3)
    assert retry.delay(2) is not None
    assert retry.delay(3) is None
    assert RetryPolicy(max_attempts=1).delay(1) is None


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"initial_delay": -1.0},
        {"max_delay": float("inf")},
        {"multiplier": 0.5},
        {"initial_delay": 5.0, "max_delay": 1.0},
        {"max_retry_after": float("nan")},
    ],
)
def test_invalid_policy_is_a_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(**options)


class FailingThenAnswering:
    """A Model that raises the given errors, one per call, then answers."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls = 0

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return AssistantTurn(text="answer")


async def test_retrying_model_passes_the_conversation_through_and_returns_the_answer() -> None:
    inner = FailingThenAnswering(TRANSIENT, TRANSIENT)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    policy = RetryPolicy(max_attempts=3, initial_delay=1.0)
    model = RetryingModel(inner, policy, sleep=sleep, rng=random.Random(3))
    turn = await model.complete("sys", [UserMessage("hi")], [])

    assert turn == AssistantTurn(text="answer")
    assert inner.calls == 3
    rng = random.Random(3)
    assert waits == [rng.uniform(0, 1.0), rng.uniform(0, 2.0)]


async def test_retrying_model_raises_a_non_retryable_error_without_waiting() -> None:
    inner = FailingThenAnswering(FINAL)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    with pytest.raises(ModelError) as caught:
        await RetryingModel(inner, sleep=sleep).complete(None, [UserMessage("hi")], [])
    assert caught.value is FINAL
    assert (inner.calls, waits) == (1, [])


async def test_retrying_model_never_catches_errors_that_are_not_model_errors() -> None:
    inner = FailingThenAnswering(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        await RetryingModel(inner).complete(None, [UserMessage("hi")], [])
    assert inner.calls == 1


async def test_cancelling_during_a_backoff_wait_stops_retrying() -> None:
    inner = FailingThenAnswering(TRANSIENT, TRANSIENT)
    waiting = asyncio.Event()

    async def sleep(delay: float) -> None:
        waiting.set()
        await asyncio.Event().wait()  # a wait only cancellation ends

    model = RetryingModel(inner, RetryPolicy(max_attempts=3), sleep=sleep)
    task = asyncio.create_task(model.complete(None, [UserMessage("hi")], []))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner.calls == 1


def test_retrying_model_refuses_what_is_not_a_model() -> None:
    with pytest.raises(ConfigError):
        RetryingModel(object())  # type: ignore[arg-type]


def test_a_retry_after_in_the_past_is_no_wait_at_all() -> None:
    assert RetryPolicy().delay(1, retry_after=-3.0) == 0.0
    assert RetryPolicy().delay(1, retry_after=0.0) == 0.0


async def test_retrying_model_gives_up_after_max_attempts_with_the_last_error() -> None:
    errors = [ModelError(f"overloaded {n}", retryable=True) for n in range(1, 4)]
    inner = FailingThenAnswering(*errors)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    model = RetryingModel(inner, RetryPolicy(max_attempts=3), sleep=sleep, rng=random.Random(1))
    with pytest.raises(ModelError) as caught:
        await model.complete(None, [UserMessage("hi")], [])
    assert caught.value is errors[2]
    assert (inner.calls, len(waits)) == (3, 2)


async def test_retrying_model_waits_a_servers_retry_after_and_stops_at_one_too_long() -> None:
    soon = ModelError("rate limited", retryable=True, retry_after=7.5, status_code=429)
    late = ModelError("rate limited", retryable=True, retry_after=900.0, status_code=429)
    inner = FailingThenAnswering(soon, late)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    model = RetryingModel(inner, RetryPolicy(max_attempts=5, max_retry_after=300.0), sleep=sleep)
    with pytest.raises(ModelError) as caught:
        await model.complete(None, [UserMessage("hi")], [])
    assert caught.value is late
    assert (inner.calls, waits) == (2, [7.5])


def test_a_model_without_a_policy_gets_the_model_default_of_five_attempts() -> None:
    model = RetryingModel(FailingThenAnswering())
    assert model.retry.max_attempts == 5
    assert model.retry.delay(5) is None and model.retry.delay(4) is not None
