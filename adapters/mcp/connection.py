"""``connect``: open an MCP session on a server, a URL, a transport or an in-process server.

The transports it builds report the end of their read stream, so the session knows it is closed
before a call is refused or sent.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Final, TypeAlias

import anyio
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import runtime
from adapters.mcp.elicitation import ElicitationResolver
from adapters.mcp.session import Session, ToolListChangedCallback
from runtime.errors import ConfigError, ProtocolError
from runtime.tools import safe_repr

__all__ = ["Target", "connect"]

Target: TypeAlias = (
    StdioServerParameters | str | Server[Any] | MCPServer | AbstractAsyncContextManager[Any]
)
"""What ``connect`` opens: ``StdioServerParameters``, an ``http(s)://`` URL (streamable HTTP), an
SDK transport (an async context manager yielding a read and a write stream), or an in-process
SDK server object (``mcp.server.Server`` or ``MCPServer``; for tests)."""

_URL: Final = re.compile(r"https?://", re.IGNORECASE)


@asynccontextmanager
async def connect(
    target: Target,
    *,
    elicitation: ElicitationResolver | None = None,
    on_tool_list_changed: ToolListChangedCallback | None = None,
    client_info: tuple[str, str] | None = None,
) -> AsyncIterator[Session]:
    """Open an MCP session to ``target`` for the length of the ``async with`` block.

    ``elicitation`` answers the server's elicitation requests (standalone, or embedded in a
    tool's input requests, SEP-2322); setting it advertises the capability. ``decline_elicitation``
    is a ready one. ``on_tool_list_changed`` is called when the server says its tool list changed:
    call ``tools`` again for the next run. ``client_info`` is the ``(name, version)`` reported to
    the server (default ``("bide", runtime.__version__)``).

    The handshake is not bounded here; wrap the block in a timeout to bound it.
    """
    name, version = _client_identity(client_info)
    if elicitation is not None and not callable(elicitation):
        raise ConfigError("elicitation must be an async callable (a resolver) or None")
    if on_tool_list_changed is not None and not callable(on_tool_list_changed):
        raise ConfigError("on_tool_list_changed must be a callable or None")
    session = Session(elicitation=elicitation, on_tool_list_changed=on_tool_list_changed)
    client = Client(
        _client_target(target, session),
        mode="auto",
        cache=None,
        client_info=types.Implementation(name=name, version=version),
        elicitation_callback=session._on_elicitation if elicitation is not None else None,
        message_handler=session._on_message,
    )
    stack = AsyncExitStack()
    try:
        await stack.enter_async_context(client)
        task_group = await stack.enter_async_context(anyio.create_task_group())
    except BaseException as exc:
        await stack.aclose()
        leaf = _single_leaf(exc)
        if not isinstance(leaf, Exception):
            raise
        if isinstance(leaf, ConfigError | OSError):
            raise leaf from None
        raise ProtocolError(
            f"could not open an MCP session: {type(leaf).__name__}: {safe_repr(str(leaf), 200)}"
        ) from exc
    try:
        session._attach(client.session, task_group)
        if on_tool_list_changed is not None and _listens_for_tool_changes(client.session):
            await task_group.start(session._listen_for_tool_list_changes)
        yield session
    finally:
        session._mark_closed()
        task_group.cancel_scope.cancel()
        # Exit without the body's exception: the SDK would wrap it in an ExceptionGroup.
        await stack.aclose()


def _client_identity(client_info: tuple[str, str] | None) -> tuple[str, str]:
    if client_info is None:
        return "bide", runtime.__version__
    if (
        not isinstance(client_info, tuple)
        or len(client_info) != 2
        or not all(isinstance(part, str) and part for part in client_info)
    ):
        raise ConfigError("client_info must be a (name, version) pair of non-empty strings")
    return client_info


def _client_target(target: Target, session: Session) -> Any:
    if isinstance(target, Server | MCPServer):
        return target
    if isinstance(target, StdioServerParameters):
        return _WatchedTransport(stdio_client(target), session._mark_closed)
    if isinstance(target, str):
        if not _URL.match(target):
            raise ConfigError(
                f"an MCP target string must be an http(s):// URL, not {safe_repr(target)}"
            )
        return _WatchedTransport(streamable_http_client(target), session._mark_closed)
    if hasattr(target, "__aenter__") and hasattr(target, "__aexit__"):
        return _WatchedTransport(target, session._mark_closed)
    raise ConfigError(
        "an MCP target is StdioServerParameters, an http(s):// URL, an SDK transport or an "
        f"in-process server, not {type(target).__name__}"
    )


def _listens_for_tool_changes(sdk: ClientSession) -> bool:
    if sdk.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # the handshake era delivers the notification to the message handler
    capabilities = sdk.server_capabilities
    return bool(capabilities and capabilities.tools and capabilities.tools.list_changed)


def _single_leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (the SDK's task groups add them)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class _WatchedTransport:
    """A transport whose read side, once it ends, marks the session known closed."""

    def __init__(self, transport: Any, on_end: Callable[[], None]) -> None:
        self._transport = transport
        self._on_end = on_end

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._transport.__aenter__()
        return _WatchedReadStream(read, self._on_end), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._on_end()
        result: bool | None = await self._transport.__aexit__(exc_type, exc, tb)
        return result


class _WatchedReadStream:
    _ENDED = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except self._ENDED:
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
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
