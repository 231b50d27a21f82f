"""tools() is bounded as a whole: list_timeout covers the wire, reading and checking every tool
(the checks run off the event loop), the number of tools and each schema's size are capped, and
a run's start record holds a digest of the tools, not the list."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from adapters.mcp import DEFAULT_MAX_SCHEMA_BYTES, DEFAULT_MAX_TOOLS, connect, tools
from runtime import Agent, ConfigError, Journal, ProtocolError, RunStatus
from runtime.testing import ScriptedModel
from tests.adapters.mcp.kit import OBJECT, Scripted

WIDE: dict[str, Any] = {
    "type": "object",
    "properties": {f"p{i}": {"type": "string", "description": "x"} for i in range(200)},
}
"""A schema of about 10 KB that takes about a tenth of a second to check."""


def listing(count: int, schema: dict[str, Any] = OBJECT) -> Scripted:
    return Scripted(*[types.Tool(name=f"t{i}", input_schema=schema) for i in range(count)])


def schema_of(size: int) -> dict[str, Any]:
    """An object schema of exactly ``size`` bytes of compact JSON."""
    schema: dict[str, Any] = {"type": "object", "description": ""}
    bare = len(json.dumps(schema, separators=(",", ":")))
    schema["description"] = "d" * (size - bare)
    return schema


def test_the_defaults_are_a_thousand_tools_and_64_kib_a_schema() -> None:
    assert (DEFAULT_MAX_TOOLS, DEFAULT_MAX_SCHEMA_BYTES) == (1000, 64 << 10)
    listed = inspect.signature(tools).parameters
    assert listed["max_tools"].default == DEFAULT_MAX_TOOLS
    assert listed["max_schema_bytes"].default == DEFAULT_MAX_SCHEMA_BYTES


async def test_checking_a_listing_is_bounded_by_list_timeout_and_never_blocks_the_loop() -> None:
    """40 wide schemas take seconds to check: the listing fails at its bound, and the event
    loop keeps running meanwhile (leases are renewed on it)."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []

    async def tick() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(loop.time() - last)
            last = loop.time()

    async with connect(listing(40, WIDE).server) as session:
        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        try:
            with pytest.raises(
                ProtocolError, match=r"'scripted' did not list its tools within 0\.5"
            ):
                await tools(session, list_timeout=0.5)
        finally:
            ticker.cancel()
        took = time.monotonic() - started
    assert took < 2.0
    assert gaps and max(gaps) < 0.3


async def test_a_listing_within_its_bound_is_checked_and_returned() -> None:
    async with connect(listing(3, WIDE).server) as session:
        listed = await tools(session, list_timeout=30)
    assert [t.spec.name for t in listed] == ["t0", "t1", "t2"]


async def test_more_tools_than_max_tools_is_refused_naming_the_server() -> None:
    async with connect(listing(21).server) as session:
        assert len(await tools(session, max_tools=21)) == 21
        with pytest.raises(ProtocolError, match=r"'scripted' lists more than 20 tools \(max_tools"):
            await tools(session, max_tools=20)
        assert len(await tools(session, max_tools=0)) == 21  # zero or less: no limit


async def test_by_default_a_server_may_list_a_thousand_tools_and_no_more() -> None:
    async with connect(listing(DEFAULT_MAX_TOOLS + 1).server) as session:
        with pytest.raises(ProtocolError, match="lists more than 1000 tools"):
            await tools(session)


async def test_a_schema_over_max_schema_bytes_is_refused_naming_the_server_and_tool() -> None:
    big = Scripted(types.Tool(name="big", input_schema=schema_of(DEFAULT_MAX_SCHEMA_BYTES + 1)))
    exact = Scripted(types.Tool(name="exact", input_schema=schema_of(DEFAULT_MAX_SCHEMA_BYTES)))
    async with connect(exact.server) as session:
        (fits,) = await tools(session)
    assert fits.spec.name == "exact"
    async with connect(big.server) as session:
        with pytest.raises(
            ProtocolError,
            match=rf"'scripted' listed big with a {DEFAULT_MAX_SCHEMA_BYTES + 1}-byte input "
            rf"schema, over the {DEFAULT_MAX_SCHEMA_BYTES}-byte limit \(max_schema_bytes\)",
        ):
            await tools(session)
        (allowed,) = await tools(session, max_schema_bytes=DEFAULT_MAX_SCHEMA_BYTES + 1)
        assert allowed.spec.name == "big"


async def test_an_output_schema_over_the_limit_is_refused_too() -> None:
    server = Scripted(types.Tool(name="out", input_schema=OBJECT, output_schema=schema_of(500)))
    async with connect(server.server) as session:
        with pytest.raises(ProtocolError, match="500-byte output schema, over the 499-byte"):
            await tools(session, max_schema_bytes=499)


@pytest.mark.parametrize("option", ["max_tools", "max_schema_bytes"])
@pytest.mark.parametrize("value", ["10", True, 1.5])
async def test_a_limit_that_is_not_an_integer_is_a_config_error(option: str, value: Any) -> None:
    async with connect(listing(1).server) as session:
        with pytest.raises(ConfigError, match=option):
            await tools(session, **{option: value})


async def test_a_runs_start_record_holds_a_digest_of_its_tools_not_the_list(
    db_path: Path,
) -> None:
    async with connect(listing(300).server) as session:
        agent = Agent(model=ScriptedModel([{"text": "done"}]), tools=await tools(session))
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    assert result.status is RunStatus.COMPLETED
    assert state.start is not None
    listed = state.start["tools"]
    assert listed["count"] == 300 and len(listed["sha256"]) == 64
    assert len(json.dumps(state.start)) < 1000  # the same for 300 tools as for 3
