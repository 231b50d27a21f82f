"""Real MCP servers for the adapter's tests: a hand-written JSON-RPC fake and a handshake-era pipe.

Nothing here imitates the SDK's client side; the fake is a server speaking the wire protocol by
hand so that it can misbehave on purpose.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client._memory import InMemoryTransport
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

HERE = Path(__file__).resolve().parent
STDIO_SERVER = HERE / "stdio_server.py"

OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def stdio_params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """Run ``stdio_server.py`` with this interpreter."""
    return StdioServerParameters(command=sys.executable, args=[str(STDIO_SERVER), *args], env=env)


def hostile_params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """Run ``stdio_server.py`` with its misbehaving tools listed too."""
    return stdio_params(*args, env={"BIDE_TEST_HOSTILE": "1", **(env or {})})


def _error(request_id: Any, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
    )


def _result(request_id: Any, result: dict[str, Any]) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))


@asynccontextmanager
async def _proxied(
    server: Server[Any] | MCPServer,
    outbound: Callable[[SessionMessage], SessionMessage | None],
    inbound: Callable[[Any], Any],
    answer: Callable[[SessionMessage], SessionMessage | None] = lambda _: None,
) -> AsyncIterator[Any]:
    """Serve ``server`` in process with every message passed through a rule on its way: a
    client's message through ``answer`` first (a reply here, and it goes no further), then
    ``outbound``; a server's through ``inbound``."""
    async with InMemoryTransport(server) as (from_server, to_server):
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](32)
        client_writes, from_client = anyio.create_memory_object_stream[SessionMessage](32)

        async def pump_out() -> None:
            async with from_client, to_server:
                async for item in from_client:
                    reply = answer(item)
                    if reply is not None:
                        await to_client.send(reply)
                    else:
                        await to_server.send(outbound(item) or item)

        async def pump_in() -> None:
            async with to_client:
                async for item in from_server:
                    await to_client.send(inbound(item))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_out)
            tg.start_soon(pump_in)
            try:
                async with client_reads, client_writes:
                    yield client_reads, client_writes
            finally:
                tg.cancel_scope.cancel()


def _as_is(item: Any) -> Any:
    return item


@asynccontextmanager
async def handshake_era(server: Server[Any] | MCPServer) -> AsyncIterator[Any]:
    """Serve ``server`` in process as a 2025-era server would: ``server/discover`` is unknown.

    The SDK's servers serve both eras and take the era from the client's first request, so the
    probe is answered here, before it reaches the server, as a server that predates it answers.
    """

    def unknown_discover(item: SessionMessage) -> SessionMessage | None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "server/discover":
            return _error(message.id, -32601, "Method not found")
        return None

    async with _proxied(server, _as_is, _as_is, unknown_discover) as streams:
        yield streams


class RawServer:
    """A handshake-era MCP server written by hand, for faults the SDK's servers never commit.

    ``on_call`` says what a ``tools/call`` gets after it is counted in ``calls``: ``"ok"``,
    ``"hangup"`` (the server closes the connection), ``"silent"`` (no answer, ever),
    ``"garbage"`` (an answer that is not a tool result), or ``("error", code)`` (a JSON-RPC
    error reply). ``tools`` is the raw ``tools/list`` answer, sent as is; with ``on_list`` set
    to ``"silent"`` tools/list is never answered.
    """

    def __init__(
        self,
        *,
        tools: list[dict[str, Any]] | None = None,
        on_call: str | tuple[str, int] = "ok",
        result: dict[str, Any] | None = None,
        on_list: str = "ok",
    ) -> None:
        self.tools = tools if tools is not None else [{"name": "act", "inputSchema": OBJECT}]
        self.on_call = on_call
        self.on_list = on_list
        self.result = result or {"content": [{"type": "text", "text": "done"}]}
        self.calls = 0
        self.requests: list[types.JSONRPCRequest] = []
        self._replies: MemoryObjectSendStream[SessionMessage | Exception] | None = None

    async def hang_up(self) -> None:
        """Close the connection now, between calls, as a server process that exits would."""
        assert self._replies is not None
        await self._replies.aclose()

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[Any]:
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](32)
        client_writes, from_client = anyio.create_memory_object_stream[SessionMessage](32)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._serve, from_client, to_client)
            try:
                async with client_reads, client_writes:
                    yield client_reads, client_writes
            finally:
                tg.cancel_scope.cancel()

    async def _serve(
        self,
        requests: MemoryObjectReceiveStream[SessionMessage],
        replies: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        self._replies = replies
        async with requests, replies:
            async for item in requests:
                message = item.message
                if not isinstance(message, types.JSONRPCRequest):
                    continue
                self.requests.append(message)
                reply = self._answer(message)
                if reply == "hangup":
                    return
                if isinstance(reply, SessionMessage):
                    try:
                        await replies.send(reply)
                    except anyio.ClosedResourceError:
                        return  # hung up

    def _answer(self, request: types.JSONRPCRequest) -> SessionMessage | str | None:
        if request.method == "initialize":
            return _result(
                request.id,
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            )
        if request.method == "tools/list":
            if self.on_list == "silent":
                return None
            return _result(request.id, {"tools": self.tools})
        if request.method != "tools/call":
            return _error(request.id, -32601, "Method not found")
        self.calls += 1
        match self.on_call:
            case "ok":
                return _result(request.id, self.result)
            case "hangup":
                return "hangup"
            case "silent":
                return None
            case "garbage":
                return _result(request.id, {"content": "this is not a list of blocks"})
            case ("error", int(code)):
                return _error(request.id, code, "the server says no")
        raise AssertionError(f"unknown on_call {self.on_call!r}")


def call_counter() -> tuple[list[str], Callable[[str], None]]:
    """A list that server tools append to, so a test can see what really ran."""
    seen: list[str] = []
    return seen, seen.append


class Scripted:
    """A low-level SDK server with one scripted answer for every call; it keeps what it saw.

    ``answer`` gets the call's params and returns the result (or raises ``MCPError`` for a
    JSON-RPC error reply). ``server`` is the ``mcp.server.Server`` to connect to.
    """

    def __init__(
        self,
        *listed: types.Tool,
        answer: Callable[[types.CallToolRequestParams], Any] | None = None,
    ) -> None:
        self.listed = list(listed) or [types.Tool(name="act", input_schema=OBJECT)]
        self.answer = answer or (lambda params: types.CallToolResult(content=[]))
        self.calls: list[types.CallToolRequestParams] = []
        self.lists = 0
        self.server: Server[Any] = Server(
            "scripted", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )

    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.lists += 1
        return types.ListToolsResult(tools=self.listed)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        self.calls.append(params)
        result = self.answer(params)
        if isinstance(result, Awaitable):
            result = await result
        return result


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


@asynccontextmanager
async def stalls_after_answering(
    server: Server[Any] | MCPServer, seconds: float
) -> AsyncIterator[Any]:
    """Serve ``server`` in process; after handing the client a tools/call answer, block the
    event loop for ``seconds``, so the answer is in hand when the caller's deadline passes.

    That is a result arriving at the deadline, made deterministic: nothing runs in between.
    """
    async with InMemoryTransport(server) as (from_server, to_server):
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](32)
        calls: set[Any] = set()

        class Writes:
            async def send(self, item: SessionMessage) -> None:
                message = item.message
                if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call":
                    calls.add(message.id)
                await to_server.send(item)

            async def aclose(self) -> None:
                await to_server.aclose()

            async def __aenter__(self) -> Writes:
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.aclose()

        async def inbound() -> None:
            async with to_client:
                async for item in from_server:
                    await to_client.send(item)
                    message = getattr(item, "message", None)
                    if isinstance(message, types.JSONRPCResponse) and message.id in calls:
                        time.sleep(seconds)  # noqa: ASYNC251 (blocks the loop on purpose)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            try:
                async with client_reads:
                    yield client_reads, Writes()
            finally:
                tg.cancel_scope.cancel()


@asynccontextmanager
async def without_result_type(server: Server[Any] | MCPServer) -> AsyncIterator[Any]:
    """Serve ``server`` in process, taking ``resultType`` out of every tools/call answer, as a
    2026-07-28 server that leaves it to its default ("complete") sends it."""
    calls: set[Any] = set()

    def note_call(item: SessionMessage) -> SessionMessage:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call":
            calls.add(message.id)
        return item

    def strip(item: Any) -> Any:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse) and message.id in calls:
            assert message.result.pop("resultType") == "complete"
        return item

    async with _proxied(server, note_call, strip) as streams:
        yield streams


class RawHTTPServer:
    """A handshake-era MCP server over HTTP on 127.0.0.1, written by hand to fail as HTTP fails.

    ``on_call`` says what a ``tools/call`` gets after it is counted in ``calls``: ``"http500"``
    (status 500, a plain-text body: no JSON-RPC in it), or ``("error", status, code, message)``
    (a JSON-RPC error reply in a JSON body, at that HTTP status).
    """

    def __init__(self, on_call: str | tuple[str, int, int, str] = "http500") -> None:
        self.on_call = on_call
        self.calls = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(405, b"", "text/plain")

            def do_DELETE(self) -> None:
                self._send(200, b"", "text/plain")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if "id" not in body:
                    self._send(202, b"", "text/plain")
                    return
                status, reply = outer._answer(body)
                if isinstance(reply, bytes):
                    self._send(status, reply, "text/plain")
                else:
                    self._send(status, json.dumps(reply).encode(), "application/json")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/mcp"

    def _answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        def result(value: dict[str, Any]) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": request["id"], "result": value}

        def error(code: int, message: str) -> dict[str, Any]:
            return {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": code, "message": message},
            }

        match request["method"]:
            case "initialize":
                return 200, result(
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw-http", "version": "0"},
                    }
                )
            case "tools/list":
                return 200, result({"tools": [{"name": "act", "inputSchema": OBJECT}]})
            case "tools/call":
                self.calls += 1
                if self.on_call == "http500":
                    return 500, b"upstream failed"
                _, status, code, message = self.on_call
                return int(status), error(int(code), str(message))
        return 200, error(-32601, "Method not found")

    def __enter__(self) -> RawHTTPServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
