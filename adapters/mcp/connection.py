"""``connect``: open an MCP session on a server, a URL, a transport or an in-process server.

The transports it builds report the end of their read stream, so the session knows it is closed
before a call is refused or sent.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.extension import advertise
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

import runtime
from adapters.mcp.auth import (
    HttpAuth,
    HttpOptions,
    Refusal,
    check_headers,
    http_auth,
    principal_of,
    refused,
)
from adapters.mcp.elicitation import ElicitationResolver
from adapters.mcp.http import http_transport
from adapters.mcp.link import Link
from adapters.mcp.session import Session, ToolListChangedCallback, parts_of
from adapters.mcp.stdio import DEFAULT_MAX_LINE_BYTES, server_name, stdio_transport
from adapters.mcp.tasks import TASKS_EXTENSION
from adapters.mcp.watched import WatchedTransport
from runtime.errors import ConfigError, ProtocolError
from runtime.tools import safe_repr

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "Target", "connect"]

DEFAULT_CONNECT_TIMEOUT: Final = 60.0
"""Seconds ``connect`` waits for a server to start and finish the handshake: one minute.

Starting a server may mean installing it first (``npx``, ``uvx``); a minute covers that on a
slow network, and a server that has not answered by then is not going to.
"""

Target: TypeAlias = (
    StdioServerParameters | str | Server[Any] | MCPServer | AbstractAsyncContextManager[Any]
)
"""What ``connect`` opens: ``StdioServerParameters``, an ``http(s)://`` URL (streamable HTTP), an
SDK transport (an async context manager yielding a read and a write stream), or an in-process
SDK server object (``mcp.server.Server`` or ``MCPServer``; for tests).

The SDK types here are inputs only, objects a caller built with the SDK: no public name,
attribute or return type of ``adapters.mcp`` is an SDK type (the public-API test checks it)."""

_URL: Final = re.compile(r"https?://", re.IGNORECASE)
_VERSIONS: Final = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


@asynccontextmanager
async def connect(
    target: Target,
    *,
    elicitation: ElicitationResolver | None = None,
    on_tool_list_changed: ToolListChangedCallback | None = None,
    client_info: tuple[str, str] | None = None,
    name: str | None = None,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    tasks: bool = False,
    headers: Mapping[str, str] | None = None,
    auth: HttpAuth | None = None,
    principal: str | None = None,
    protocol_version: str | None = None,
) -> AsyncIterator[Session]:
    """Open an MCP session to ``target`` for the length of the ``async with`` block.

    ``elicitation`` answers the server's elicitation requests (standalone, or embedded in a
    tool's input requests, SEP-2322); setting it advertises the capability. ``decline_elicitation``
    is a ready one. ``on_tool_list_changed`` is called when the server says its tool list changed:
    call ``tools`` again for the next run. ``client_info`` is the ``(name, version)`` reported to
    the server (default ``("bide", runtime.__version__)``).

    ``name`` names the server in errors and before each line of a stdio server's stderr (default:
    from its command or URL). ``connect_timeout`` bounds starting the server and the handshake
    (``DEFAULT_CONNECT_TIMEOUT``; ``None``: no bound). ``max_line_bytes`` bounds one line a
    stdio server writes (``DEFAULT_MAX_LINE_BYTES``; zero or less: no limit).

    ``tasks`` declares the MCP tasks extension: a server may then answer a call with a task,
    whose id a side effect journals the moment it arrives and then polls to its end; after a
    crash a resume polls the task instead of halting (see ``docs/mcp.md``).

    For a URL, ``headers`` go on every HTTP request (an API key, a static bearer token) and
    ``auth`` authorizes them: a token provider (an async function returning a bearer token) or
    an ``httpx2.Auth`` such as the SDK's OAuth providers (``client_credentials`` builds one).
    A server that refuses the connection (HTTP 401 or 403) is an ``AuthorizationError`` naming
    it and what is missing, before any tool is called. Credentials never reach an error, a log
    line or the journal. ``principal`` names who the calls are made as (default: what ``auth``
    names, such as ``client_credentials``' client id); a side effect journals it with the server.

    ``protocol_version`` pins the protocol instead of probing for 2026-07-28 first: a
    2026-07-28-era version speaks it without the probe; a handshake-era one (``"2025-11-25"``)
    skips the probe and makes the 2025 handshake, for servers that mishandle the probe.
    """
    identity = _client_identity(client_info)
    if elicitation is not None and not callable(elicitation):
        raise ConfigError("elicitation must be an async callable (a resolver) or None")
    if on_tool_list_changed is not None and not callable(on_tool_list_changed):
        raise ConfigError("on_tool_list_changed must be a callable or None")
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError("name must be a non-empty string or None")
    seconds = _seconds(connect_timeout, "connect_timeout")
    if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int):
        raise ConfigError(f"max_line_bytes must be an integer, not {max_line_bytes!r}")
    called = name if name is not None else _describe(target)
    if not isinstance(tasks, bool):
        raise ConfigError("tasks must be True or False")
    extra_headers = check_headers(headers)
    authorizer = http_auth(auth)
    if (extra_headers or authorizer is not None) and not isinstance(target, str):
        raise ConfigError("headers and auth apply to an http(s):// URL target only")
    mode = _mode(protocol_version)
    refusal = Refusal()
    http = HttpOptions(extra_headers, authorizer, refusal)
    session = Session(
        elicitation=elicitation, on_tool_list_changed=on_tool_list_changed, tasks=tasks, name=called
    )
    parts = parts_of(session)
    link = parts.link
    link.principal = principal_of(principal, authorizer)
    link.credentials = bool(extra_headers) or authorizer is not None
    client = Client(
        _client_target(target, link, called, max_line_bytes, http),
        mode=mode,
        cache=None,
        client_info=types.Implementation(name=identity[0], version=identity[1]),
        elicitation_callback=parts.elicitor.on_elicitation if elicitation is not None else None,
        message_handler=parts.watch.on_message,
        extensions=[advertise(TASKS_EXTENSION)] if tasks else None,
    )
    stack = AsyncExitStack()
    bound = asyncio.timeout(seconds)
    try:
        async with bound:
            await stack.enter_async_context(client)
        task_group = await stack.enter_async_context(anyio.create_task_group())
    except BaseException as exc:
        link.mark_closed()
        await stack.aclose()
        if bound.expired():
            raise ProtocolError(
                f"MCP server {called!r} did not finish the handshake within {seconds:g} s"
            ) from None
        if link.failure is not None and not isinstance(exc, asyncio.CancelledError):
            raise link.failure from None
        leaf = _single_leaf(exc)
        if not isinstance(leaf, Exception):
            raise
        problem = refused(refusal, leaf, server=called, credentials=link.credentials)
        if problem is not None:
            raise problem from None
        if isinstance(leaf, ConfigError | OSError):
            raise leaf from None
        raise ProtocolError(
            f"could not open an MCP session with {called!r}: "
            f"{type(leaf).__name__}: {safe_repr(str(leaf), 200)}"
        ) from exc
    try:
        link.sdk = client.session
        parts.watch.attach(task_group)
        if on_tool_list_changed is not None and _listens_for_tool_changes(client.session):
            await task_group.start(parts.watch.listen)
        yield session
    finally:
        link.mark_closed()
        task_group.cancel_scope.cancel()
        # Exit without the body's exception: the SDK would wrap it in an ExceptionGroup.
        await stack.aclose()


def _seconds(value: object, what: str) -> float | None:
    """A timeout option: positive seconds, or ``None`` (or zero or less, or infinity) for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{what} must be a number of seconds or None, not {value!r}")
    return float(value) if 0 < value < math.inf else None


def _describe(target: object) -> str:
    if isinstance(target, StdioServerParameters):
        return server_name(target)
    if isinstance(target, str):
        try:
            parts = urlsplit(target)
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            return "?"
        return f"{parts.hostname or '?'}{port}{parts.path}"
    if isinstance(target, Server | MCPServer):
        return str(getattr(target, "name", "in-process server"))
    return type(target).__name__


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


def _mode(version: object) -> str:
    if version is None:
        return "auto"
    if version in MODERN_PROTOCOL_VERSIONS:
        return str(version)
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return "legacy"
    raise ConfigError(
        f"protocol_version must be one of {', '.join(_VERSIONS)} or None (probe), not "
        f"{safe_repr(version)}"
    )


def _client_target(
    target: Target, link: Link, name: str, max_line_bytes: int, http: HttpOptions
) -> Any:
    if isinstance(target, Server | MCPServer):
        return target
    if isinstance(target, StdioServerParameters):
        if sys.platform == "win32":  # pragma: no cover
            return WatchedTransport(stdio_client(target), link)
        transport = stdio_transport(
            target, name=name, max_line_bytes=max_line_bytes, on_failure=link.fail
        )
        link.trace_errors()  # every error on the read stream came from the server's stdout
        return WatchedTransport(transport, link, errors_are_the_servers=True)
    if isinstance(target, str):
        if not _URL.match(target):
            raise ConfigError(
                f"an MCP target string must be an http(s):// URL, not {safe_repr(target)}"
            )
        link.trace_errors()  # the transport reports what the server's bytes said
        endpoint = target

        def on_status(url: str, status: int, headers: Mapping[str, str]) -> None:
            http.refusal.seen(url, endpoint, status, headers)

        transport = http_transport(
            target,
            on_server_error=link.server_error,
            headers=http.headers,
            auth=http.auth,
            on_status=on_status,
            on_refused=link.refused_call,
        )
        return WatchedTransport(transport, link)
    if hasattr(target, "__aenter__") and hasattr(target, "__aexit__"):
        return WatchedTransport(target, link)
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
