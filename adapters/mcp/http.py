"""Streamable HTTP with a witness: which JSON-RPC errors the server really sent.

The SDK's HTTP transport makes up JSON-RPC errors of its own (an HTTP 5xx, a 202, a stream
that ended early, a body it could not parse) and hands them to the session exactly as it
hands the server's replies. This transport reads the bytes the server sent as the SDK reads
them, and reports each error reply found there, so the session can tell a server's definite
"no" from a lost answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
from mcp.client.streamable_http import streamable_http_client

from runtime.jsontext import parse_json

__all__ = ["RefusalSeen", "ServerErrorSeen", "StatusSeen", "http_transport"]

ServerErrorSeen = Callable[[Any, int, str], None]
"""Told ``(request id, code, message)`` of each JSON-RPC error reply in the server's bytes."""

StatusSeen = Callable[[str, int, Mapping[str, str]], None]
"""Told ``(url, status, headers)`` of each HTTP response."""

RefusalSeen = Callable[[Any, int, str | None], None]
"""Told ``(request id, status, WWW-Authenticate)`` when the POST carrying a tools/call request
was itself answered 401 or 403 (the server refused that request before acting on it), and
again with the later status if the same request, sent again, was answered otherwise."""

_MAX_WITNESSED: Final = 1 << 20
"""Bytes of one JSON body or SSE event read for error replies; a larger one is not witnessed
(its errors then count as possibly made up, the safe side)."""

_MAX_PENDING: Final = 1024
"""Refused tools/call ids remembered, in case the same request is sent again."""

_CONNECT_SECONDS: Final = 30.0
_READ_SECONDS: Final = 300.0
"""The SDK's own HTTP timeouts: a server may hold a response stream open for a long call."""


@asynccontextmanager
async def http_transport(
    url: str,
    *,
    on_server_error: ServerErrorSeen,
    headers: Mapping[str, str] | None = None,
    auth: httpx2.Auth | None = None,
    on_status: StatusSeen | None = None,
    on_refused: RefusalSeen | None = None,
) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport on a client whose responses are witnessed.

    ``headers`` go on every request and ``auth`` authorizes them (its own requests, such as
    OAuth discovery and token requests, pass through the same witness: they carry no JSON-RPC
    error replies, so they change nothing in what it reports). ``on_status`` is told the URL,
    status and headers of every response; ``on_refused`` of each tools/call request whose own
    POST was answered 401 or 403 (the last answer counts: an OAuth provider that authorizes
    again and re-sends the request gets a fresh one).
    """
    client = httpx2.AsyncClient(
        timeout=httpx2.Timeout(_CONNECT_SECONDS, read=_READ_SECONDS),
        # Compressed bodies could not be witnessed; ask for none.
        headers={"accept-encoding": "identity", **(headers or {})},
        auth=auth,
        transport=_Witness(httpx2.AsyncHTTPTransport(), on_server_error, on_status, on_refused),
    )
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class _Witness(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        seen: ServerErrorSeen,
        status: StatusSeen | None = None,
        refused: RefusalSeen | None = None,
    ) -> None:
        self._inner = inner
        self._seen = seen
        self._status = status
        self._refused = refused
        self._pending: set[str] = set()  # tools/call ids last answered 401 or 403

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if self._status is not None:
            self._status(str(request.url), response.status_code, response.headers)
        status = response.status_code
        if self._refused is not None and (status in (401, 403) or self._pending):
            call_id = _tools_call_id(request)
            if call_id is not None and status in (401, 403):
                self._pending.add(str(call_id))
                self._refused(call_id, status, response.headers.get("www-authenticate"))
            elif call_id is not None and str(call_id) in self._pending:
                # The same request sent again (an OAuth provider authorized anew) and answered
                # otherwise: the last answer is the one that counts.
                self._pending.discard(str(call_id))
                self._refused(call_id, status, None)
            if len(self._pending) > _MAX_PENDING:
                self._pending.clear()
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if (
            encoded
            or kind not in ("application/json", "text/event-stream")
            or not isinstance(response.stream, httpx2.AsyncByteStream)
        ):
            return response  # not witnessed: its errors count as possibly made up
        stream = _WitnessedStream(response.stream, kind == "text/event-stream", self._seen)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WitnessedStream(httpx2.AsyncByteStream):
    """Passes the body through unchanged, reporting the error replies in it as they complete."""

    def __init__(self, inner: httpx2.AsyncByteStream, sse: bool, seen: ServerErrorSeen) -> None:
        self._inner = inner
        self._sse = sse
        self._seen = seen
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._size = 0
        self._given_up = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            # Witnessed before it is passed on, so the report precedes the SDK's delivery.
            self._take(chunk)
            yield chunk
        if self._sse:
            if self._buffer.endswith(b"\r"):  # a CR held back as a possible half of a CRLF
                self._take_line(bytes(self._buffer[:-1]))
        elif not self._given_up:
            self._report(bytes(self._buffer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _take(self, chunk: bytes) -> None:
        if self._given_up:
            return
        self._buffer += chunk
        if not self._sse:
            if len(self._buffer) > _MAX_WITNESSED:
                self._given_up = True
                self._buffer.clear()
            return
        self._take_lines()
        if len(self._buffer) > _MAX_WITNESSED:
            # One endless line: drop what is held and spoil the event it belongs to.
            self._buffer.clear()
            self._data, self._size = [], _MAX_WITNESSED + 1

    def _take_lines(self) -> None:
        # An SSE line ends in CRLF, LF or CR; a CR at the very end may be half of a CRLF.
        while True:
            lf, cr = self._buffer.find(b"\n"), self._buffer.find(b"\r")
            ends = [i for i in (lf, cr) if i >= 0]
            if not ends:
                return
            end = min(ends)
            if end == cr and end == len(self._buffer) - 1:
                return
            width = 2 if self._buffer[end : end + 2] == b"\r\n" else 1
            line = bytes(self._buffer[:end])
            del self._buffer[: end + width]
            self._take_line(line)

    def _take_line(self, line: bytes) -> None:
        if not line:
            if self._data:
                self._report(b"\n".join(self._data))
            self._data, self._size = [], 0
            return
        field, _, value = line.partition(b":")
        if field == b"data":
            value = value.removeprefix(b" ")
            self._size += len(value)
            if self._size <= _MAX_WITNESSED:
                self._data.append(value)

    def _report(self, body: bytes) -> None:
        try:
            message = parse_json(body.decode("utf-8", "replace"))
        except ValueError:
            return
        if not isinstance(message, dict) or "id" not in message:
            return
        error = message.get("error")
        if isinstance(error, dict):
            code, text = error.get("code"), error.get("message")
            if isinstance(code, int) and not isinstance(code, bool) and isinstance(text, str):
                self._seen(message["id"], code, text)


def _tools_call_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of the tools/call request this HTTP request carries, if it carries one."""
    if request.method != "POST":
        return None
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return None  # a streamed body: not witnessed, so the refusal counts as a lost answer
    try:
        message = parse_json(body.decode("utf-8", "replace"))
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message:
        return message["id"]
    return None
