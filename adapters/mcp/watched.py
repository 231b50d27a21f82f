"""A transport watched for the session: the end of its read stream marks the session known
closed, and its traffic tells the ``Link`` which tools/call requests left and which error
replies the server itself sent for them."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from adapters.mcp.link import Link

__all__ = ["WatchedTransport"]


class WatchedTransport:
    """A transport whose read side, once it ends, marks the session known closed, and whose
    traffic tells the session which tools/call requests left and, when ``errors_are_the_servers``,
    which error replies the server sent for them."""

    def __init__(self, transport: Any, link: Link, *, errors_are_the_servers: bool = False) -> None:
        self._transport = transport
        self._link = link
        self._errors_are_the_servers = errors_are_the_servers

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._transport.__aenter__()
        on_error = self._link.server_error if self._errors_are_the_servers else None
        return (
            _WatchedReadStream(read, self._link.mark_closed, on_error, self._link.received),
            _WatchedWriteStream(write, self._link.sending),
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._link.mark_closed()
        result: bool | None = await self._transport.__aexit__(exc_type, exc, tb)
        return result


class _WatchedReadStream:
    _ENDED = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)

    def __init__(
        self,
        stream: Any,
        on_end: Callable[[], None],
        on_error: Callable[[Any, int, str], None] | None,
        on_item: Callable[[Any], Any],
    ) -> None:
        self._stream = stream
        self._on_end = on_end
        self._on_error = on_error
        self._on_item = on_item

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    def _seen(self, item: Any) -> Any:
        if self._on_error is not None and isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCError):
                self._on_error(message.id, message.error.code, message.error.message)
        return self._on_item(item)

    async def receive(self) -> Any:
        try:
            return self._seen(await self._stream.receive())
        except self._ENDED:
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return self._seen(await self._stream.__anext__())
        except (StopAsyncIteration, *self._ENDED):
            self._on_end()
            raise

    async def aclose(self) -> None:
        self._on_end()
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._on_end()
        result: bool | None = await self._stream.__aexit__(exc_type, exc, tb)
        return result


class _WatchedWriteStream:
    def __init__(self, stream: Any, on_send: Callable[[object], None]) -> None:
        self._stream = stream
        self._on_send = on_send

    async def send(self, item: Any) -> None:
        # Noted before it leaves, in the sender's context, so the call knows its request id.
        self._on_send(getattr(item, "message", None))
        await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> _WatchedWriteStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._stream.__aexit__(exc_type, exc, tb)
        return result
