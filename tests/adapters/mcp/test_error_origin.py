"""A JSON-RPC error the server sent is a definite failure; one the client made up for a broken
transport is an unknown outcome. Told apart by where the error came from, never by its code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
import pytest

from adapters.mcp import connect, tools
from adapters.mcp.http import _WitnessedStream
from runtime import ToolContext, ToolError, ToolOutcomeUnknown
from tests.adapters.mcp.kit import RawHTTPServer, hostile_params

# The codes the SDK also makes up for a lost answer, each with the SDK's own wording where it
# has one: sent by a server, every one of them is still the server's definite "no".
SERVER_SENT = [
    (types.INTERNAL_ERROR, "insufficient funds"),
    (types.INTERNAL_ERROR, "Server returned an error response"),
    (types.CONNECTION_CLOSED, "Connection closed"),
    (types.REQUEST_TIMEOUT, "Request 'tools/call' timed out"),
    (types.PARSE_ERROR, "Failed to parse JSON response"),
    (types.INVALID_REQUEST, "Session terminated"),
    (types.INVALID_PARAMS, "no such account"),
]


def side_effect() -> ToolContext:
    return ToolContext(run_id="run-1", call_id="call-1", tool_name="refuse")


async def refused(target: Any) -> list[ToolError]:
    """Call ``refuse`` once for each of ``SERVER_SENT`` on one session; what each raised."""
    errors: list[ToolError] = []
    async with connect(target) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        for code, message in SERVER_SENT:
            with pytest.raises(ToolError) as caught:
                await by_name["refuse"].call({"code": code, "message": message}, side_effect())
            errors.append(caught.value)
            # The session is not taken for closed, whatever the server's words.
            assert not session.closed
        assert await by_name["echo"].call({"text": "still here"})
    return errors


def assert_definite(errors: list[ToolError]) -> None:
    for (code, message), error in zip(SERVER_SENT, errors, strict=True):
        assert type(error) is ToolError, (code, message, error)
        assert message in str(error) and str(code) in str(error)
        assert (error.run_id, error.call_id) == ("run-1", "call-1")


async def test_an_error_a_stdio_server_sent_is_a_definite_failure_whatever_its_code(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    assert_definite(await refused(hostile_params(env={"BIDE_TEST_RUNS": str(runs)})))
    assert runs.read_text().splitlines() == ["refuse"] * len(SERVER_SENT) + ["echo"]


async def test_a_stdio_connection_the_client_saw_close_mid_call_is_unknown(tmp_path: Path) -> None:
    """The SDK reports it as -32000 "Connection closed", as a server may too: origin decides."""
    async with connect(hostile_params(env={"BIDE_TEST_RUNS": str(tmp_path / "runs")})) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        with pytest.raises(ToolOutcomeUnknown, match="-32000"):
            await by_name["die"].call({}, side_effect())


async def test_an_error_a_streamable_http_server_sent_is_a_definite_failure_whatever_its_code(
    hostile_http_server: str,
) -> None:
    assert_definite(await refused(hostile_http_server))


async def test_an_http_500_without_a_json_rpc_error_is_unknown_though_the_sdk_says_32603() -> None:
    with RawHTTPServer("http500") as raw:
        async with connect(raw.url) as session:
            (act,) = await tools(session)
            with pytest.raises(ToolOutcomeUnknown, match="-32603") as caught:
                await act.call({}, side_effect())
    assert "Server returned an error response" in str(caught.value)
    assert raw.calls == 1


@pytest.mark.parametrize("status", [200, 500])
async def test_a_json_rpc_error_in_an_http_body_is_the_servers_whatever_the_status(
    status: int,
) -> None:
    with RawHTTPServer(("error", status, types.INTERNAL_ERROR, "insufficient funds")) as raw:
        async with connect(raw.url) as session:
            (act,) = await tools(session)
            with pytest.raises(ToolError, match="insufficient funds") as caught:
                await act.call({}, side_effect())
    assert type(caught.value) is ToolError
    assert raw.calls == 1


class Chunks(httpx2.AsyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def witnessed(sse: bool, *chunks: bytes) -> list[tuple[Any, int, str]]:
    seen: list[tuple[Any, int, str]] = []
    stream = _WitnessedStream(Chunks(*chunks), sse, lambda *error: seen.append(error))
    passed = b"".join([chunk async for chunk in stream])
    assert passed == b"".join(chunks)  # the body reaches the SDK unchanged
    return seen


ERROR_EVENT = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"no funds"}}'


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
async def test_the_witness_finds_an_error_reply_in_an_event_stream_split_anywhere(
    end: bytes,
) -> None:
    body = b"event: message" + end + b"data: " + ERROR_EVENT + end + end
    for cut in range(1, len(body)):
        assert await witnessed(True, body[:cut], body[cut:]) == [(7, -32603, "no funds")]


async def test_the_witness_reports_results_and_unfinished_events_as_nothing() -> None:
    result = b'data: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n\n'
    assert await witnessed(True, result, b"data: " + ERROR_EVENT) == []


async def test_the_witness_finds_an_error_reply_in_a_json_body() -> None:
    assert await witnessed(False, ERROR_EVENT[:10], ERROR_EVENT[10:]) == [(7, -32603, "no funds")]
    assert await witnessed(False, b"upstream failed") == []
