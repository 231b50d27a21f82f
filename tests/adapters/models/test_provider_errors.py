"""Failures every provider maps alike onto ModelError, and RetryingModel over real HTTP.

Each test runs once per provider (the ``dialect`` fixture) against the scripted server.
"""

from __future__ import annotations

import email.utils
import random
import socket
import time

import pytest

from runtime.errors import ModelError
from runtime.retry import RetryingModel, RetryPolicy
from tests.adapters.models.conftest import HELLO, Dialect
from tests.adapters.models.provider_server import JSONReply, ProviderServer, Silence, SSEReply


def error_reply(status: int, message: str = "slow down", **headers: str) -> JSONReply:
    body = {"type": "error", "error": {"type": "some_error", "message": message}}
    return JSONReply(body, status=status, headers=headers)


class Sleeps:
    """Stands in for asyncio.sleep: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_429_with_retry_after_seconds_is_retried_after_exactly_that_wait(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(error_reply(429, **{"retry-after": "7"}), dialect.text_reply())
    sleeps = Sleeps()
    model = RetryingModel(dialect.make(), RetryPolicy(max_attempts=3), sleep=sleeps)

    turn = await model.complete(None, HELLO, [])

    assert turn.text == "done"
    assert sleeps.delays == [7.0]
    assert [r.path for r in server.received] == [dialect.path, dialect.path]


async def test_429_with_retry_after_http_date_waits_until_that_moment(
    server: ProviderServer, dialect: Dialect
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.script(error_reply(429, **{"retry-after": when}), dialect.text_reply())
    sleeps = Sleeps()
    model = RetryingModel(dialect.make(), RetryPolicy(max_attempts=2), sleep=sleeps)

    await model.complete(None, HELLO, [])

    (delay,) = sleeps.delays
    assert 27.0 < delay <= 30.0  # whole seconds on the wire, and the clock moved a little


async def test_retry_after_ms_is_preferred_to_retry_after(
    server: ProviderServer, dialect: Dialect
) -> None:
    headers = {"retry-after-ms": "1500", "retry-after": "9"}
    server.script(error_reply(429, **headers), dialect.text_reply())
    sleeps = Sleeps()
    model = RetryingModel(dialect.make(), RetryPolicy(max_attempts=2), sleep=sleeps)

    await model.complete(None, HELLO, [])

    assert sleeps.delays == [1.5]


async def test_retry_after_beyond_max_retry_after_gives_up_at_once(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(error_reply(429, **{"retry-after": "3600"}))
    sleeps = Sleeps()
    retry = RetryPolicy(max_attempts=5, max_retry_after=120)
    model = RetryingModel(dialect.make(), retry, sleep=sleeps)

    with pytest.raises(ModelError) as caught:
        await model.complete(None, HELLO, [])

    assert (caught.value.status_code, caught.value.retry_after) == (429, 3600.0)
    assert sleeps.delays == []
    assert len(server.received) == 1


async def test_500_then_success_is_retried_after_a_full_jitter_backoff(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(error_reply(500, "boom"), dialect.text_reply())
    sleeps = Sleeps()
    retry = RetryPolicy(max_attempts=3, initial_delay=0.5)
    model = RetryingModel(dialect.make(), retry, sleep=sleeps, rng=random.Random(1234))

    turn = await model.complete(None, HELLO, [])

    assert turn.text == "done"
    assert sleeps.delays == [random.Random(1234).uniform(0.0, 0.5)]
    assert len(server.received) == 2


async def test_retries_stop_after_max_attempts_with_the_last_error(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(error_reply(503, "one"), error_reply(503, "two"), error_reply(502, "three"))
    sleeps = Sleeps()
    model = RetryingModel(dialect.make(), RetryPolicy(max_attempts=3), sleep=sleeps)

    with pytest.raises(ModelError, match="three") as caught:
        await model.complete(None, HELLO, [])

    assert caught.value.status_code == 502
    assert len(sleeps.delays) == 2
    assert len(server.received) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_4xx_is_not_retried_and_keeps_its_status_and_message(
    server: ProviderServer, dialect: Dialect, status: int
) -> None:
    server.script(error_reply(status, "messages: field required"), dialect.text_reply())
    sleeps = Sleeps()
    model = RetryingModel(dialect.make(), RetryPolicy(max_attempts=5), sleep=sleeps)

    with pytest.raises(ModelError, match="messages: field required") as caught:
        await model.complete(None, HELLO, [])

    assert caught.value.retryable is False
    assert caught.value.status_code == status
    assert caught.value.retry_after is None
    assert sleeps.delays == []
    assert len(server.received) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
async def test_the_sdk_makes_one_request_and_leaves_retrying_to_bide(
    server: ProviderServer, dialect: Dialect, status: int
) -> None:
    server.script(error_reply(status), dialect.text_reply())

    with pytest.raises(ModelError) as caught:
        await dialect.make().complete(None, HELLO, [])

    assert caught.value.retryable is True
    assert caught.value.status_code == status
    assert len(server.received) == 1


@pytest.mark.parametrize(("status", "verdict"), [(500, "false"), (400, "true")])
async def test_x_should_retry_header_overrides_the_status(
    server: ProviderServer, dialect: Dialect, status: int, verdict: str
) -> None:
    server.script(error_reply(status, **{"x-should-retry": verdict}))
    with pytest.raises(ModelError) as caught:
        await dialect.make().complete(None, HELLO, [])
    assert caught.value.retryable is (verdict == "true")


async def test_a_server_that_never_answers_times_out_quickly_and_retryably(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(Silence())
    started = time.monotonic()

    with pytest.raises(ModelError, match=r"silent for longer than timeout=0\.3s") as caught:
        await dialect.make(timeout=0.3).complete(None, HELLO, [])

    assert time.monotonic() - started < 5
    assert caught.value.retryable is True
    assert caught.value.status_code is None


async def test_a_stream_that_stalls_midway_times_out_retryably(
    server: ProviderServer, dialect: Dialect
) -> None:
    partial = dialect.text_reply()
    assert isinstance(partial, SSEReply)
    server.script(SSEReply(partial.events[:2], end="hang"))
    started = time.monotonic()

    with pytest.raises(ModelError, match="silent") as caught:
        await dialect.make(timeout=0.3).complete(None, HELLO, [])

    assert time.monotonic() - started < 5
    assert caught.value.retryable is True


async def test_total_timeout_bounds_a_stream_that_trickles_forever(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(SSEReply([": keep-alive\n\n"] * 400, delay=0.05))
    started = time.monotonic()

    with pytest.raises(ModelError, match=r"total_timeout=0\.4s") as caught:
        await dialect.make(timeout=5.0, total_timeout=0.4).complete(None, HELLO, [])

    assert time.monotonic() - started < 5
    assert caught.value.retryable is True


async def test_a_turn_is_bounded_by_default_and_the_bound_can_be_lifted_explicitly(
    dialect: Dialect,
) -> None:
    """A server trickling keep-alives cannot hold a drive for ever unless the host asks."""
    from adapters.models._wire import DEFAULT_TOTAL_TIMEOUT

    assert DEFAULT_TOTAL_TIMEOUT == 600.0
    assert dialect.make(timeout=5.0).total_timeout == DEFAULT_TOTAL_TIMEOUT
    assert dialect.make(total_timeout=30).total_timeout == 30
    assert dialect.make(total_timeout=None).total_timeout is None


async def test_connection_refused_is_a_retryable_error(dialect: Dialect) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port once the probe is closed.
    base_url = f"http://127.0.0.1:{port}" + ("/v1" if dialect.name == "openai" else "")

    with pytest.raises(ModelError, match="connection failed") as caught:
        await dialect.make(base_url=base_url, timeout=2.0).complete(None, HELLO, [])

    assert caught.value.retryable is True
    assert caught.value.status_code is None


async def test_a_5xx_body_that_is_not_json_still_gives_a_retryable_error(
    server: ProviderServer, dialect: Dialect
) -> None:
    server.script(JSONReply("<html>bad gateway</html>", status=502))
    with pytest.raises(ModelError, match="bad gateway") as caught:
        await dialect.make().complete(None, HELLO, [])
    assert (caught.value.retryable, caught.value.status_code) == (True, 502)
