"""Calling an MCP tool: what comes back, and how each outcome is classified."""

from __future__ import annotations

import asyncio
import json
from types import MappingProxyType
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as ServerToolError
from pydantic import BaseModel

from adapters.mcp import (
    DEFAULT_MAX_RESULT_BYTES,
    IDEMPOTENCY_KEY_META,
    ResultTooLargeError,
    connect,
    tools,
)
from adapters.mcp.link import within as _within
from runtime import (
    Safety,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolError,
    ToolOutcomeUnknown,
)
from runtime.functions import tool
from runtime.tools import enforces_timeout
from tests.adapters.mcp.kit import OBJECT, Scripted, text


def context(safety: Safety = Safety.SIDE_EFFECT) -> ToolContext:
    return ToolContext(run_id="run-1", call_id="call-1", tool_name="act", safety=safety)


async def call_once(
    server: Any, arguments: Any = None, ctx: ToolContext | None = None, **options: Any
) -> Any:
    """Connect, list, call the first tool once, disconnect."""
    async with connect(server) as session:
        first = (await tools(session, **options))[0]
        return await first.call({} if arguments is None else arguments, ctx)


class Total(BaseModel):
    total: int


def adder() -> MCPServer:
    server = MCPServer("adder")

    @server.tool()
    def add(a: int, b: int) -> Total:
        """Add two numbers."""
        return Total(total=a + b)

    return server


async def test_the_result_is_the_json_of_the_content_blocks() -> None:
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    scripted = Scripted(answer=lambda p: types.CallToolResult(content=[text("hi"), image]))
    assert await call_once(scripted.server) == [
        {"type": "text", "text": "hi"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ]


async def test_a_structured_tool_still_returns_its_content_blocks() -> None:
    value = await call_once(adder(), {"a": 2, "b": 3})
    assert value == [{"type": "text", "text": json.dumps({"total": 5}, indent=2)}]


async def test_structured_content_is_the_result_when_there_are_no_content_blocks() -> None:
    scripted = Scripted(
        answer=lambda p: types.CallToolResult(content=[], structured_content={"total": 5})
    )
    assert await call_once(scripted.server) == {"total": 5}


async def test_no_blocks_and_no_structured_content_is_an_empty_list() -> None:
    assert await call_once(Scripted().server) == []


async def test_a_result_over_the_limit_says_the_tool_ran_and_how_large_it_was() -> None:
    scripted = Scripted(answer=lambda p: types.CallToolResult(content=[text("x" * 2000)]))
    with pytest.raises(ResultTooLargeError) as caught:
        await call_once(scripted.server, max_result_bytes=1000)
    error = caught.value
    size = len(json.dumps([{"type": "text", "text": "x" * 2000}], separators=(",", ":")))
    assert not isinstance(error, ToolOutcomeUnknown)
    assert (error.size, error.limit) == (size, 1000)
    assert "ran" in str(error) and str(size) in str(error)
    assert len(str(error)) < 200  # the refused result is not in the message
    assert len(scripted.calls) == 1


async def test_the_result_limit_is_measured_in_bytes_of_json_and_the_exact_limit_passes() -> None:
    blocks = [{"type": "text", "text": "é" * 100}]
    size = len(json.dumps(blocks, ensure_ascii=False, separators=(",", ":")).encode())
    scripted = Scripted(answer=lambda p: types.CallToolResult(content=[text("é" * 100)]))
    assert await call_once(scripted.server, max_result_bytes=size) == blocks
    with pytest.raises(ResultTooLargeError):
        await call_once(scripted.server, max_result_bytes=size - 1)


async def test_the_default_result_limit_is_one_mebibyte() -> None:
    just_over = "x" * DEFAULT_MAX_RESULT_BYTES
    scripted = Scripted(answer=lambda p: types.CallToolResult(content=[text(just_over)]))
    with pytest.raises(ResultTooLargeError):
        await call_once(scripted.server)


async def test_the_result_limit_applies_to_is_error_results() -> None:
    scripted = Scripted(
        answer=lambda p: types.CallToolResult(content=[text("e" * 500)], is_error=True)
    )
    with pytest.raises(ResultTooLargeError):
        await call_once(scripted.server, max_result_bytes=100)


@pytest.mark.parametrize("limit", [0, -5])
async def test_a_result_limit_of_zero_or_less_removes_it(limit: int) -> None:
    big = "x" * (DEFAULT_MAX_RESULT_BYTES + 10)
    scripted = Scripted(answer=lambda p: types.CallToolResult(content=[text(big)]))
    assert await call_once(scripted.server, max_result_bytes=limit) == [
        {"type": "text", "text": big}
    ]


async def test_is_error_is_a_definite_tool_error_carrying_the_content() -> None:
    scripted = Scripted(
        answer=lambda p: types.CallToolResult(content=[text("disk"), text("full")], is_error=True)
    )
    with pytest.raises(ToolError) as caught:
        await call_once(scripted.server, ctx=context())
    assert type(caught.value) is ToolError
    assert str(caught.value) == "disk\nfull"
    assert caught.value.data == [{"type": "text", "text": "disk"}, {"type": "text", "text": "full"}]
    assert (caught.value.run_id, caught.value.call_id) == ("run-1", "call-1")


async def test_a_tool_exception_in_the_high_level_server_is_a_definite_tool_error() -> None:
    server = MCPServer("failing")

    @server.tool()
    def act() -> str:
        raise ServerToolError("no such account")

    with pytest.raises(ToolError, match="no such account") as caught:
        await call_once(server)
    assert type(caught.value) is ToolError


async def test_a_json_rpc_error_reply_is_a_definite_tool_error() -> None:
    def refuse(params: types.CallToolRequestParams) -> Any:
        raise MCPError(code=types.INVALID_PARAMS, message="no widget 7")

    scripted = Scripted(answer=refuse)
    with pytest.raises(ToolError, match="no widget 7") as caught:
        await call_once(scripted.server)
    assert type(caught.value) is ToolError
    assert len(scripted.calls) == 1


async def test_a_header_mismatch_reply_is_final_not_relisted_and_resent() -> None:
    # mcp.Client.call_tool would list the tools again and send the call a second time.
    def mismatch(params: types.CallToolRequestParams) -> Any:
        raise MCPError(code=types.HEADER_MISMATCH, message="header mismatch")

    scripted = Scripted(answer=mismatch)
    with pytest.raises(ToolError, match="header mismatch") as caught:
        await call_once(scripted.server)
    assert type(caught.value) is ToolError
    assert (scripted.lists, len(scripted.calls)) == (1, 1)


async def test_a_result_that_breaks_its_output_schema_is_returned_not_refused() -> None:
    # The SDK's call_tool raises RuntimeError here, after the tool ran.
    listed = types.Tool(
        name="act",
        input_schema=OBJECT,
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    scripted = Scripted(
        listed,
        answer=lambda p: types.CallToolResult(content=[], structured_content={"n": "many"}),
    )
    assert await call_once(scripted.server) == {"n": "many"}


@pytest.mark.parametrize(
    "arguments",
    [[1, 2], "a=1", 7, {"when": {1, 2}}, {"x": float("nan")}, {1: "a"}, {"x": [{2: "b"}]}],
    ids=["list", "string", "number", "set-value", "nan-value", "int-key", "nested-int-key"],
)
async def test_arguments_that_are_not_a_json_object_are_refused_unsent(arguments: Any) -> None:
    scripted = Scripted()
    with pytest.raises(ToolArgumentsError):
        await call_once(scripted.server, arguments)
    assert scripted.calls == []


async def test_arguments_that_fail_the_input_schema_are_refused_unsent() -> None:
    listed = types.Tool(
        name="act",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
    )
    scripted = Scripted(listed)
    for bad in ({}, {"n": "seven"}, {"n": 7, "extra": 1}):
        with pytest.raises(ToolArgumentsError, match="do not fit its schema"):
            await call_once(scripted.server, bad)
    assert scripted.calls == []
    await call_once(scripted.server, {"n": 7})
    assert [c.arguments for c in scripted.calls] == [{"n": 7}]


async def test_arguments_in_any_mapping_are_sent_as_a_plain_object() -> None:
    scripted = Scripted()
    await call_once(scripted.server, MappingProxyType({"n": MappingProxyType({"m": (1, 2)})}))
    assert [c.arguments for c in scripted.calls] == [{"n": {"m": [1, 2]}}]


@pytest.mark.parametrize("safety", list(Safety))
async def test_every_call_carries_its_idempotency_key_in_meta(safety: Safety) -> None:
    """Side effects too: a server may deduplicate, or a reconciler look a charge up, by it."""
    scripted = Scripted()
    ctx = context(safety)
    await call_once(scripted.server, ctx=ctx, safety={"act": safety})
    (sent,) = scripted.calls
    assert sent.meta is not None
    assert sent.meta[IDEMPOTENCY_KEY_META] == ctx.idempotency_key


async def test_a_call_made_without_a_context_carries_no_idempotency_key() -> None:
    scripted = Scripted()
    await call_once(scripted.server)
    (sent,) = scripted.calls
    assert IDEMPOTENCY_KEY_META not in (sent.meta or {})


async def test_a_call_on_a_closed_session_is_a_definite_error_and_never_sent() -> None:
    scripted = Scripted()
    async with connect(scripted.server) as session:
        (act,) = await tools(session)
    assert session.closed
    with pytest.raises(ToolError, match="not called: the MCP session is closed") as caught:
        await act.call({})
    assert type(caught.value) is ToolError
    assert scripted.calls == []


def sleeper(started: asyncio.Event) -> MCPServer:
    server = MCPServer("sleeper")

    @server.tool()
    async def act(seconds: float, ctx: Context) -> str:
        started.set()
        await anyio.sleep(seconds)
        return "woke"

    return server


async def test_a_call_past_call_timeout_is_outcome_unknown() -> None:
    started = asyncio.Event()
    with anyio.fail_after(5):
        with pytest.raises(ToolOutcomeUnknown, match=r"did not answer within 0\.2 s"):
            await call_once(sleeper(started), {"seconds": 30}, call_timeout=0.2)
    assert started.is_set()


async def test_a_call_within_call_timeout_returns_its_result() -> None:
    value = await call_once(sleeper(asyncio.Event()), {"seconds": 0}, call_timeout=5)
    assert value == [{"type": "text", "text": "woke"}]


async def test_cancelling_a_call_reraises_cancelled_error() -> None:
    started = asyncio.Event()
    async with connect(sleeper(started)) as session:
        (act,) = await tools(session)
        task = asyncio.ensure_future(act.call({"seconds": 30}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The session is still usable afterwards.
        assert await act.call({"seconds": 0}) == [{"type": "text", "text": "woke"}]


async def test_cancelling_a_call_under_call_timeout_reraises_cancelled_error() -> None:
    started = asyncio.Event()
    async with connect(sleeper(started)) as session:
        (act,) = await tools(session, call_timeout=30)
        task = asyncio.ensure_future(act.call({"seconds": 30}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_an_answer_landing_while_a_timed_out_call_is_abandoned_is_used() -> None:
    landed = types.CallToolResult(content=[text("late")])

    async def answers_when_abandoned() -> types.CallToolResult:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return landed  # the answer was already in hand when the cancellation arrived
        raise AssertionError("not reached")

    assert await _within(answers_when_abandoned(), 0.05, "act", {}) is landed


async def test_an_error_landing_after_the_timeout_is_outcome_unknown() -> None:
    async def fails_when_abandoned() -> types.CallToolResult:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise ToolError("act failed: too late") from None
        raise AssertionError("not reached")

    with pytest.raises(ToolOutcomeUnknown):
        await _within(fails_when_abandoned(), 0.05, "act", {})


async def test_returned_tools_satisfy_the_tool_protocol() -> None:
    async with connect(adder()) as session:
        (add,) = await tools(session)
    assert isinstance(add, Tool)


async def test_an_mcp_tool_declares_it_enforces_its_own_timeout_and_a_function_tool_does_not() -> (
    None
):
    """The agent reads the declaration to leave an MCP call without a second deadline."""
    async with connect(adder()) as session:
        (add,) = await tools(session)
    assert enforces_timeout(add) is True

    @tool
    async def plain() -> None:
        """Nothing."""

    class Claims:
        enforces_timeout = "yes"  # anything but True is no declaration

    assert enforces_timeout(plain) is False
    assert enforces_timeout(Claims()) is False
