"""Faults no well-behaved server commits, against a JSON-RPC server written by hand."""

from __future__ import annotations

import anyio
import mcp.types as types
import pytest

from adapters.mcp import connect, tools
from runtime import ToolContext, ToolError, ToolOutcomeUnknown
from tests.adapters.mcp.kit import RawServer


async def test_a_connection_lost_after_the_request_left_is_outcome_unknown() -> None:
    raw = RawServer(on_call="hangup")
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        ctx = ToolContext(run_id="run-1", call_id="call-1", tool_name="act")
        with pytest.raises(ToolOutcomeUnknown) as caught:
            await act.call({}, ctx)
    assert raw.calls == 1
    assert (caught.value.run_id, caught.value.call_id) == ("run-1", "call-1")


async def test_a_call_after_the_connection_was_lost_is_refused_unsent() -> None:
    raw = RawServer(on_call="hangup")
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        with pytest.raises(ToolOutcomeUnknown):
            await act.call({})
        assert session.closed
        with pytest.raises(ToolError, match="not called: the MCP session is closed") as caught:
            await act.call({})
    assert type(caught.value) is ToolError
    assert raw.calls == 1


async def test_a_connection_lost_while_idle_makes_the_next_call_refused_unsent() -> None:
    raw = RawServer()
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        await raw.hang_up()
        with anyio.fail_after(5):
            while not session.closed:
                await anyio.sleep(0.01)
        with pytest.raises(ToolError, match="not called") as caught:
            await act.call({})
    assert type(caught.value) is ToolError
    assert raw.calls == 0


async def test_a_server_that_never_answers_times_out_as_outcome_unknown() -> None:
    raw = RawServer(on_call="silent")
    async with connect(raw.transport()) as session:
        (act,) = await tools(session, call_timeout=0.2)
        with pytest.raises(ToolOutcomeUnknown, match="did not answer"):
            await act.call({})
        # The abandoned request was cancelled politely, and the session lives on.
        assert not session.closed
    assert raw.calls == 1


async def test_an_answer_that_cannot_be_read_is_outcome_unknown() -> None:
    raw = RawServer(on_call="garbage")
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        with pytest.raises(ToolOutcomeUnknown, match="could not be read"):
            await act.call({})
    assert raw.calls == 1


async def test_structured_content_without_a_content_list_is_outcome_unknown() -> None:
    raw = RawServer(result={"structuredContent": {"n": 1}})
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        with pytest.raises(ToolOutcomeUnknown, match="could not be read"):
            await act.call({})


@pytest.mark.parametrize(
    "code",
    [
        types.CONNECTION_CLOSED,
        types.REQUEST_TIMEOUT,
        types.PARSE_ERROR,
        types.INVALID_REQUEST,
        types.INTERNAL_ERROR,
    ],
)
async def test_on_a_transport_that_cannot_say_where_errors_come_from_made_up_codes_are_unknown(
    code: int,
) -> None:
    """An SDK transport bide did not build: the codes the SDK also makes up stay unknown."""
    raw = RawServer(on_call=("error", code))
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        with pytest.raises(ToolOutcomeUnknown, match=f"error {code}"):
            await act.call({})


@pytest.mark.parametrize("code", [types.INVALID_PARAMS, types.METHOD_NOT_FOUND, -32050, 1, 0])
async def test_other_error_replies_are_definite_tool_errors(code: int) -> None:
    raw = RawServer(on_call=("error", code))
    async with connect(raw.transport()) as session:
        (act,) = await tools(session)
        with pytest.raises(ToolError, match="the server says no") as caught:
            await act.call({})
    assert type(caught.value) is ToolError
