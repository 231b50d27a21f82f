"""The connection under a ``Session``: the SDK session, whether it is known closed, and what
crossed the wire (which tools/call requests left, which error replies the server itself sent,
which messages could not be read, and the calls in flight they belong to).

This is the seam between the adapter's modules: the calls and their input rounds
(``adapters.mcp.rounds``), tasks (``adapters.mcp.tasks``), elicitation
(``adapters.mcp.answering``), the tool-list watch (``adapters.mcp.watch``) and ``connect`` use
a ``Link`` through its public methods only. It is not part of ``adapters.mcp``'s public API.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
import pydantic
from mcp import ClientSession, MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from adapters.mcp.stdio import UnreadableMessage
from runtime.errors import ConfigError, ProtocolError, ToolOutcomeUnknown
from runtime.logs import get_logger
from runtime.tools import Interrupted, ToolContext, safe_repr

__all__ = [
    "Active",
    "Link",
    "Raw",
    "Sent",
    "brief_validation",
    "ids_of",
    "retrieve",
    "server_text",
    "within",
]

log = get_logger(__name__)

_MAX_SERVER_TEXT: Final = 2000


class Raw(pydantic.RootModel[dict[str, Any]]):
    """An answer kept as the JSON object it was, to be checked by its own reader."""


@dataclass(slots=True)
class Active:
    """A tool call in flight on this session, so an elicitation can be traced to it."""

    call: ToolContext | None
    durable: bool
    asked: int = 0
    paused: Interrupted | None = None
    rounds: bool = False
    """A side effect's SEP-2322 input rounds are journaled and answered from the journal."""
    alarm: asyncio.Timeout | None = None
    unreadable: str | None = None
    """Why an answer the call may have been waiting for could not be read; set, the call ends
    at once (``alarm`` goes off) as an unknown outcome instead of waiting for its timeout."""

    def cannot_read(self, why: str) -> None:
        if self.unreadable is None:
            self.unreadable = why
        if self.alarm is not None and not self.alarm.expired():
            self.alarm.reschedule(asyncio.get_running_loop().time())


@dataclass(slots=True)
class Sent:
    """One tools/call request of a call: its JSON-RPC id, once the transport has seen it leave,
    and the call it belongs to."""

    request_id: str | None = None
    active: Active | None = None


_SENDING: Final = contextvars.ContextVar[Sent | None]("bide_mcp_sending", default=None)


class Link:
    """One connection's state, shared by the modules that use it (see the module docstring)."""

    def __init__(self, *, name: str = "mcp", tasks: bool = False) -> None:
        self.name = name
        self.tasks = tasks
        self.principal: Callable[[], str | None] = _nobody
        """Who the calls are made as (``connect``'s ``principal``, or what the authorizer
        names), asked at each call: never a credential."""
        self.credentials = False
        """Whether ``connect`` was given credentials (headers or an authorizer)."""
        self.sdk: ClientSession | None = None
        self.closed = False
        self.failure: ProtocolError | None = None
        self.active: list[Active] = []
        # Where errors come from, when the transport can tell: the ids of tools/call requests
        # sent and not yet answered, and the error replies the server itself sent for them.
        self._traces_errors = False
        self._calls_sent: dict[str, Sent] = {}
        self._server_errors: dict[str, tuple[int, str]] = {}
        # HTTP 401 or 403 answered to the very POST that carried a tools/call request.
        self._refusals: dict[str, tuple[int, str | None]] = {}

    @property
    def protocol_version(self) -> str | None:
        return self.sdk.protocol_version if self.sdk is not None else None

    def connected(self) -> ClientSession:
        if self.sdk is None:
            raise ConfigError("this MCP session is not connected; use it inside `connect(...)`")
        return self.sdk

    async def request(self, request: Any) -> dict[str, Any]:
        """Send a request and return its answer as the JSON object it was."""
        return (await self.connected().send_request(request, Raw)).root

    # -- closed state ------------------------------------------------------------------------

    def mark_closed(self) -> None:
        self.closed = True

    def fail(self, failure: ProtocolError) -> None:
        """The transport broke the protocol: the session is closed, and says why from now on."""
        if self.failure is None:
            self.failure = failure
        self.closed = True
        log.warning("mcp_session_failed", error=str(failure))

    def why(self) -> str:
        return f" ({self.failure})" if self.failure is not None else ""

    def note_failure(self, exc: MCPError) -> None:
        # The SDK's own spelling of a closed connection; a server echoing it only makes later
        # calls refuse early, which is safe.
        if exc.error.code == types.CONNECTION_CLOSED and exc.error.message == "Connection closed":
            self.closed = True

    # -- what crossed the wire ---------------------------------------------------------------

    def trace_errors(self) -> None:
        """The transport reports every error reply the server itself sent (``server_error``)."""
        self._traces_errors = True

    def sending_as(self, sent: Sent) -> contextvars.Token[Sent | None]:
        """Requests sent from this context, until ``reset``, belong to ``sent``."""
        return _SENDING.set(sent)

    def reset(self, token: contextvars.Token[Sent | None]) -> None:
        _SENDING.reset(token)

    def sending(self, message: object) -> None:
        """A message is leaving: note the id of a tools/call, for the call that sends it."""
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call":
            key = str(message.id)
            sent = _SENDING.get() or Sent()
            sent.request_id = key
            self._calls_sent[key] = sent

    def received(self, item: object) -> object:
        """Each item the transport read, before the SDK sees it, read as the protocol says.

        From 2026-07-28 a result without ``resultType`` is complete (the specification's
        default; the SDK refuses it). A message that cannot be read fails at once the call it
        answered, as an unknown outcome; when it names no call, every call in flight, since
        any of them may have been the one answered. The session itself goes on.
        """
        if isinstance(item, Exception):
            self._cannot_read(item)
            return item
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if (
            isinstance(message, types.JSONRPCResponse)
            and "resultType" not in message.result
            and self.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):
            result = {**message.result, "resultType": "complete"}
            return SessionMessage(
                message.model_copy(update={"result": result}), metadata=item.metadata
            )
        return item

    def _cannot_read(self, problem: Exception) -> None:
        why = _unreadable_text(problem)
        log.warning("mcp_unreadable_message", error=why)
        answered = problem.request_id if isinstance(problem, UnreadableMessage) else None
        sent = self._calls_sent.get(answered) if answered is not None else None
        if sent is not None and sent.active is not None:
            sent.active.cannot_read(why)
            return
        for active in self.active:
            active.cannot_read(why)

    def server_error(self, request_id: object, code: int, message: str) -> None:
        key = str(request_id)
        if key in self._calls_sent:
            self._server_errors[key] = (code, message)

    def refused_call(self, request_id: object, status: int, challenge: str | None) -> None:
        """The HTTP response to the POST carrying this tools/call request was a 401 or 403:
        the server refused that request itself, before acting on it. Any other status: the
        request was sent again and answered, so an earlier refusal no longer counts."""
        key = str(request_id)
        if status not in (401, 403):
            self._refusals.pop(key, None)
        elif key in self._calls_sent:
            self._refusals[key] = (status, challenge)

    def refusal(self, sent: Sent) -> tuple[int, str | None] | None:
        """The 401 or 403 the server answered this request's own POST with, if it did."""
        return self._refusals.get(sent.request_id) if sent.request_id is not None else None

    def sent_by_server(self, sent: Sent, exc: MCPError) -> bool | None:
        """Whether the server itself sent this error; ``None`` when the transport cannot say."""
        if not self._traces_errors:
            return None
        if sent.request_id is None:
            return False
        return self._server_errors.get(sent.request_id) == (exc.error.code, exc.error.message)

    def forget(self, sent: Sent) -> None:
        if sent.request_id is not None:
            self._calls_sent.pop(sent.request_id, None)
            self._server_errors.pop(sent.request_id, None)
            self._refusals.pop(sent.request_id, None)


def _nobody() -> str | None:
    return None


def ids_of(call: ToolContext | None) -> dict[str, str]:
    return {"run_id": call.run_id, "call_id": call.call_id} if call is not None else {}


def server_text(text: str) -> str:
    """Untrusted text from the server, bounded, for an error the model reads.

    Host-facing errors quote server text with ``safe_repr`` instead.
    """
    if len(text) <= _MAX_SERVER_TEXT:
        return text
    return f"{text[:_MAX_SERVER_TEXT]}... ({len(text)} chars)"


def brief_validation(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(safe_repr(part, 32).strip('"') for part in error["loc"])
        parts.append(f"{where or 'result'}: {error['msg']}")
    return "; ".join(parts)


def _unreadable_text(problem: Exception) -> str:
    if isinstance(problem, UnreadableMessage):
        return str(problem)
    if isinstance(problem, pydantic.ValidationError):
        return f"not a JSON-RPC message: {brief_validation(problem)}"
    return f"{type(problem).__name__}: {safe_repr(str(problem), 200)}"


async def within(
    attempt: Awaitable[types.CallToolResult],
    seconds: float,
    name: str,
    ids: dict[str, str],
) -> types.CallToolResult:
    """Await ``attempt`` up to ``seconds``; an answer landing while it is abandoned still counts."""
    task = asyncio.ensure_future(attempt)
    try:
        await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        retrieve(task)
        raise
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
        if task.cancelled() or task.exception() is not None:
            retrieve(task)
            raise ToolOutcomeUnknown(
                f"{name} did not answer within {seconds:g} s; it may still be running", **ids
            )
    return task.result()


def retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
