"""Bounded waits: connecting, listing and calling each have a default bound, settable."""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

import anyio
import mcp
import pytest

from adapters.mcp import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIST_TIMEOUT,
    connect,
    tools,
)
from runtime import ConfigError, ProtocolError
from tests.adapters.mcp.kit import RawServer

MUTE = mcp.StdioServerParameters(command=sys.executable, args=["-c", "import time; time.sleep(60)"])


def test_the_defaults_are_a_minute_to_connect_half_a_minute_to_list_five_to_call() -> None:
    assert (DEFAULT_CONNECT_TIMEOUT, DEFAULT_LIST_TIMEOUT, DEFAULT_CALL_TIMEOUT) == (60, 30, 300)
    assert inspect.signature(connect).parameters["connect_timeout"].default == 60
    listing = inspect.signature(tools).parameters
    assert listing["list_timeout"].default == 30
    assert listing["call_timeout"].default == 300


async def test_a_server_that_never_finishes_the_handshake_fails_connect_at_its_timeout() -> None:
    started = time.monotonic()
    with anyio.fail_after(20):
        with pytest.raises(ProtocolError, match=r"'mute'.*handshake within 0\.5 s"):
            async with connect(MUTE, name="mute", connect_timeout=0.5):
                raise AssertionError("connected to a server that never answers")
    assert time.monotonic() - started < 15


async def test_a_server_that_never_answers_tools_list_fails_it_at_list_timeout() -> None:
    raw = RawServer(on_list="silent")
    async with connect(raw.transport()) as session:
        with anyio.fail_after(10):
            with pytest.raises(ProtocolError, match=r"did not list its tools within 0\.3 s"):
                await tools(session, list_timeout=0.3)
        assert not session.closed


async def test_every_tool_has_the_default_call_timeout_unless_told_otherwise() -> None:
    async with connect(RawServer().transport()) as session:
        ((default,), (chosen,), (unbounded,)) = [
            await tools(session),
            await tools(session, call_timeout=2.5),
            await tools(session, call_timeout=None),
        ]
    assert default.spec.timeout == DEFAULT_CALL_TIMEOUT
    assert chosen.spec.timeout == 2.5
    assert unbounded.spec.timeout is None  # only when the host says so


@pytest.mark.parametrize("option", ["call_timeout", "list_timeout"])
@pytest.mark.parametrize("value", ["30", True, float("nan")])
async def test_a_timeout_that_is_not_seconds_is_a_config_error(option: str, value: Any) -> None:
    async with connect(RawServer().transport()) as session:
        with pytest.raises(ConfigError, match=option):
            await tools(session, **{option: value})


@pytest.mark.parametrize("value", ["60", True, float("nan")])
async def test_a_connect_timeout_that_is_not_seconds_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match="connect_timeout"):
        async with connect(RawServer().transport(), connect_timeout=value):
            pass
