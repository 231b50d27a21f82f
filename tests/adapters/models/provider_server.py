"""A scripted HTTP/1.1 server on 127.0.0.1, speaking just enough of a provider's wire protocol.

The SDKs under test run their real HTTP paths against it. Each connection takes the next
scripted reply; the server records every request it received (method, path, headers, JSON body).
Written by hand on asyncio streams so that a test can make the server misbehave in exactly the
ways a real network does: answer slowly, never answer, or drop a stream half-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class Reply(Protocol):
    async def send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None: ...


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [f"HTTP/1.1 {status} {phrase}", "connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True)
class JSONReply:
    """A whole JSON body with a status and headers."""

    body: Any
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)

    async def send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        payload = json.dumps(self.body).encode()
        head = {
            "content-type": "application/json",
            "content-length": str(len(payload)),
            **self.headers,
        }
        writer.write(_head(self.status, head) + payload)
        await writer.drain()


@dataclass(frozen=True)
class SSEReply:
    """An event stream, one chunk per event, ending as ``end`` says.

    ``"done"``: the terminating chunk, a clean end. ``"drop"``: the connection closes without it,
    as when a proxy or the server dies. ``"hang"``: nothing more is sent and nothing is closed.
    """

    events: Sequence[str]
    end: Literal["done", "drop", "hang"] = "done"
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)

    async def send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = {
            "content-type": "text/event-stream; charset=utf-8",
            "transfer-encoding": "chunked",
            "cache-control": "no-cache",
            **self.headers,
        }
        writer.write(_head(200, head))
        for event in self.events:
            data = event.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
            if self.delay:
                await asyncio.sleep(self.delay)
        if self.end == "done":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        elif self.end == "hang":
            await reader.read()  # until the client gives up and closes


@dataclass(frozen=True)
class Silence:
    """Accept the request and never answer, until the client gives up."""

    async def send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()


class ProviderServer:
    """Serves scripted replies in order, one per connection; records what it received."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._replies: deque[Reply] = deque()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    def script(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            raw = await reader.readexactly(length) if length else b""
            self.received.append(Received(method, path, headers, json.loads(raw) if raw else None))
            reply: Reply = (
                self._replies.popleft()
                if self._replies
                else JSONReply({"error": {"message": "the test scripted no reply"}}, status=418)
            )
            await reply.send(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()


# --- OpenAI Chat Completions ---------------------------------------------------------------


def openai_chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": (
            [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish_reason}]
            if choices
            else []
        ),
    }
    if usage is not None:
        chunk["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return chunk


def openai_events(*chunks: Mapping[str, Any], done: bool = True) -> list[str]:
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return [*events, "data: [DONE]\n\n"] if done else events


def openai_text_stream(text: str = "done", usage: tuple[int, int] = (3, 1)) -> SSEReply:
    return SSEReply(
        openai_events(
            openai_chunk({"role": "assistant", "content": text}),
            openai_chunk(finish_reason="stop"),
            openai_chunk(choices=False, usage=usage),
        )
    )


# --- Anthropic Messages -------------------------------------------------------------------


def anthropic_event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def anthropic_events(
    blocks: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: tuple[int, int] = (3, 1),
    cache: tuple[int, int] = (0, 0),
    stop: bool = True,
) -> list[str]:
    """A whole Messages stream: ``{"text": ...}`` blocks and ``{"id", "name", "json"}`` tool uses.

    Text and tool input arrive in two deltas each, so that the adapter must join them.
    """
    events = [
        anthropic_event(
            "message_start",
            message={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage[0],
                    "output_tokens": 1,
                    "cache_creation_input_tokens": cache[0],
                    "cache_read_input_tokens": cache[1],
                },
            },
        ),
        anthropic_event("ping"),
    ]
    for index, block in enumerate(blocks):
        if "text" in block:
            text = block["text"]
            half = len(text) // 2
            events.append(
                anthropic_event(
                    "content_block_start",
                    index=index,
                    content_block={"type": "text", "text": ""},
                )
            )
            for piece in (text[:half], text[half:]):
                events.append(
                    anthropic_event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "text_delta", "text": piece},
                    )
                )
        else:
            raw = block["json"]
            half = len(raw) // 2
            events.append(
                anthropic_event(
                    "content_block_start",
                    index=index,
                    content_block={
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                )
            )
            for piece in (raw[:half], raw[half:]):
                events.append(
                    anthropic_event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
                )
        events.append(anthropic_event("content_block_stop", index=index))
    events.append(
        anthropic_event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": usage[1]},
        )
    )
    if stop:
        events.append(anthropic_event("message_stop"))
    return events


def anthropic_text_stream(text: str = "done", usage: tuple[int, int] = (3, 1)) -> SSEReply:
    return SSEReply(anthropic_events([{"text": text}], usage=usage))
