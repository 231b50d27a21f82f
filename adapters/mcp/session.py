"""The MCP session bide holds: its closed state, tool calls with their input rounds, elicitation.

Every elicitation, whichever protocol era carries it, goes through ``_answer_elicitation``: for
a call made with durable elicitation it is answered from the run's journal (or pauses the run),
otherwise by the host's live resolver.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import anyio
import anyio.abc
import mcp_types as types
import pydantic
from mcp import ClientSession, MCPError
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.subscriptions import ToolsListChanged, listen
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from adapters.mcp import tasks as T
from adapters.mcp.elicitation import ElicitationAnswer, ElicitationRequest, ElicitationResolver
from adapters.mcp.stdio import UnreadableMessage
from runtime.errors import ConfigError, ProtocolError, ToolError, ToolOutcomeUnknown
from runtime.logs import get_logger
from runtime.tools import Interrupted, ToolContext, safe_repr

__all__ = ["MAX_INPUT_ROUNDS", "Session", "ToolListChangedCallback"]

log = get_logger(__name__)

ToolListChangedCallback: TypeAlias = Callable[[], Awaitable[None] | None]
"""Called with no arguments when the server says its tool list changed; may be async."""

MAX_INPUT_ROUNDS: Final = 10
"""Rounds of SEP-2322 input requests one call may take before its outcome is called unknown."""

_STATE_ONLY_BACKOFF: Final = (0.05, 0.25)
"""First and longest pause before re-sending a call the server answered with only request state."""

_LISTEN_ACK_TIMEOUT: Final = 10.0
"""Seconds to wait for a 2026-07-28 server to acknowledge the tool-list subscription."""

_CALL_RESULT: Final = pydantic.TypeAdapter[types.CallToolResult | types.InputRequiredResult](
    types.CallToolResult | types.InputRequiredResult
)

# Codes the SDK also makes up locally when an answer is lost or unreadable (connection closed,
# read timeout, and the streamable HTTP transport's stand-ins for a failed POST, a 202, a 5xx or
# a body it could not parse). Only on a transport bide did not build, which cannot say where an
# error came from, does an error carrying one count as an unknown outcome: calling a lost answer
# a definite failure could fire an effect twice.
_AMBIGUOUS_CODES: Final = frozenset(
    {
        types.CONNECTION_CLOSED,
        types.REQUEST_TIMEOUT,
        types.PARSE_ERROR,
        types.INVALID_REQUEST,
        types.INTERNAL_ERROR,
    }
)

_MAX_SERVER_TEXT: Final = 2000


class _Raw(pydantic.RootModel[dict[str, Any]]):
    """An answer kept as the JSON object it was, to be checked by its own reader."""


@dataclass(slots=True)
class _Round:
    """One tools/call request of a call: its JSON-RPC id, once the transport has seen it leave,
    and the call it belongs to."""

    request_id: str | None = None
    active: _Active | None = None


_ROUND: Final = contextvars.ContextVar[_Round | None]("bide_mcp_round", default=None)


@dataclass(slots=True)
class _Active:
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


class Session:
    """A connected MCP client session, as ``connect`` yields it; pass it to ``tools``.

    It tracks whether the connection is known to be closed (the SDK reports "already closed"
    and "lost mid-call" alike), so that a call refused before sending is a definite failure.
    """

    def __init__(
        self,
        *,
        elicitation: ElicitationResolver | None = None,
        on_tool_list_changed: ToolListChangedCallback | None = None,
        tasks: bool = False,
        name: str = "mcp",
    ) -> None:
        self._sdk: ClientSession | None = None
        self._tasks = tasks
        self._name = name
        self._resolver = elicitation
        self._on_tool_list_changed = on_tool_list_changed
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._failure: ProtocolError | None = None
        self._active: list[_Active] = []
        # Where errors come from, when the transport can tell: the ids of tools/call requests
        # sent and not yet answered, and the error replies the server itself sent for them.
        self._traces_errors = False
        self._calls_sent: dict[str, _Round] = {}
        self._server_errors: dict[str, tuple[int, str]] = {}

    @classmethod
    def _adopt(cls, sdk: ClientSession) -> Session:
        """Wrap a session the caller already holds; its own callbacks answer input requests."""
        session = cls()
        session._sdk = sdk
        return session

    @property
    def closed(self) -> bool:
        """True once the connection is known closed; later calls are refused, never sent."""
        return self._closed

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version, e.g. ``"2025-11-25"`` or ``"2026-07-28"``."""
        return self._sdk.protocol_version if self._sdk is not None else None

    @property
    def server_info(self) -> tuple[str, str] | None:
        """The server's ``(name, version)`` as it reported them (untrusted), if it did."""
        info = self._sdk.server_info if self._sdk is not None else None
        return (info.name, info.version) if info is not None else None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<adapters.mcp.Session {state} protocol={self.protocol_version}>"

    # -- calls -------------------------------------------------------------------------------

    async def _list_tools_page(self, cursor: str | None) -> types.ListToolsResult:
        sdk = self._connected()
        if self._closed:
            raise ProtocolError(f"cannot list tools: the MCP session is closed{self._why()}")
        try:
            return await sdk.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        except MCPError as exc:
            self._note_failure(exc)
            if self._failure is not None:
                raise ProtocolError(f"tools/list failed: {self._failure}") from exc
            raise ProtocolError(
                f"MCP server failed tools/list: {safe_repr(exc.error.message, 200)} "
                f"(JSON-RPC error {exc.error.code})"
            ) from exc
        except pydantic.ValidationError as exc:
            raise ProtocolError(
                f"MCP server sent a tools/list answer that does not follow the protocol: "
                f"{_brief_validation(exc)}"
            ) from exc
        except Exception as exc:
            raise ProtocolError(
                f"tools/list failed: {type(exc).__name__}: {safe_repr(str(exc), 200)}"
            ) from exc

    async def _call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any] | None,
        call: ToolContext | None,
        seconds: float | None,
        durable: bool = False,
        rounds: bool = False,
        resume: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Send one tools/call (with its input rounds) and return the server's final answer.

        With ``rounds`` (a side effect made with durable elicitation) each input round the
        server asks for is journaled as a step of the attempt and the run pauses for its
        answer; ``resume`` is such a journaled round, answered now: the call goes on from it.

        Raises a definite ``ToolError`` when the call was provably not sent or the server
        replied with an error, and ``ToolOutcomeUnknown`` for anything else after it may have
        left. Cancellation propagates, and so does ``Interrupted`` when a durable elicitation
        has no journaled answer yet (the retry-safe call runs again once it has).
        """
        ids = _ids(call)
        if self._closed and resume is not None:
            raise ToolOutcomeUnknown(
                f"{name}: its journaled input round cannot be continued, the MCP session is "
                f"closed{self._why()}; earlier rounds may have acted",
                **ids,
            )
        if self._closed:
            raise ToolError(f"{name} was not called: the MCP session is closed{self._why()}", **ids)
        active = _Active(call, durable, rounds=rounds and call is not None)
        self._active.append(active)
        try:
            attempt = self._unless_unreadable(
                name,
                active,
                self._run_call(name, arguments, meta=meta, call=call, active=active, resume=resume),
            )
            answer = await (attempt if seconds is None else _within(attempt, seconds, name, ids))
        finally:
            self._active.remove(active)
        if active.paused is not None:
            # A handshake-era question was journaled and answered "cancel" to the server; what
            # the call returned after that is discarded, and the call runs again when answered.
            raise active.paused
        return answer

    async def _unless_unreadable(
        self, name: str, active: _Active, attempt: Awaitable[types.CallToolResult]
    ) -> types.CallToolResult:
        """Await ``attempt``, ending it at once when the transport reads something that may have
        been its answer and cannot be read (``_received``): an unknown outcome."""
        try:
            async with asyncio.timeout(None) as alarm:
                active.alarm = alarm
                if active.unreadable is not None:
                    active.cannot_read(active.unreadable)
                return await attempt
        except TimeoutError:
            if active.unreadable is None:
                raise
            raise ToolOutcomeUnknown(
                f"{name}: the server sent a message that could not be read "
                f"({active.unreadable}); it may have been this call's answer: the tool may "
                "have run",
                **_ids(active.call),
            ) from None
        finally:
            active.alarm = None

    async def _run_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any] | None,
        call: ToolContext | None,
        active: _Active,
        resume: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        if resume is None:
            answer = await self._send_call(name, arguments, meta=meta, call=call, active=active)
        else:
            # A journaled round, continued: its answers come from the journal, and its state
            # goes back exactly as the server sent it.
            responses = await self._answer_round(name, resume, active)
            answer = await self._send_call(
                name,
                arguments,
                meta=meta,
                call=call,
                active=active,
                start=(responses, resume.get("state"), int(resume["round"]) + 1),
            )
        if isinstance(answer, types.CallToolResult):
            return answer
        # The server took the call as a task. Its id is journaled before anything else: from
        # the commit on, a crash leaves a call whose outcome a resume can poll for.
        if call is not None:
            await call.record_handle(T.handle_of(answer.task_id, self._name))
        log.info("mcp_task_started", tool=name, task=answer.task_id, status=answer.status)
        return await self._follow_task(name, answer, _ids(call))

    async def _resume_task(
        self, name: str, task_id: str, *, call: ToolContext, seconds: float | None
    ) -> types.CallToolResult:
        """Poll a task a crashed or halted attempt journaled, to its end, within ``seconds``."""
        ids = _ids(call)
        if self._closed:
            raise ToolOutcomeUnknown(
                f"{name}: task {safe_repr(task_id)} cannot be polled, the MCP session is closed"
                f"{self._why()}; it may have run",
                **ids,
            )
        known = T.TaskState(task_id, "working", None)
        attempt = self._follow_task(name, known, ids, wait_first=False)
        return await (attempt if seconds is None else _within(attempt, seconds, name, ids))

    async def _follow_task(
        self, name: str, state: T.TaskState, ids: dict[str, str], *, wait_first: bool = True
    ) -> types.CallToolResult:
        """Poll ``tasks/get`` until the task ends, at the pace the server asks (bounded)."""
        pause, wait = T.DEFAULT_POLL_SECONDS, wait_first
        while not state.ended:
            if state.status == "input_required":
                raise ToolOutcomeUnknown(
                    f"{name}: task {safe_repr(state.task_id)} asks for input, which bide does "
                    "not give to a task; it may have acted",
                    **ids,
                )
            if state.poll_seconds is not None:
                pause = min(max(state.poll_seconds, T.MIN_POLL_SECONDS), T.MAX_POLL_SECONDS)
            if wait:
                await asyncio.sleep(pause)
            wait = True
            state = await self._get_task(name, state.task_id, ids)
        log.info("mcp_task_ended", tool=name, task=state.task_id, status=state.status)
        if state.result is not None:
            return state.result  # completed, or failed with the server's own isError result
        said = f": {_server_text(state.message)}" if state.message else ""
        if state.status == "cancelled":
            # A cancelled task proves nothing about what it did before it stopped: an unknown
            # outcome, so a side effect halts and a retry-safe call is retried, never a
            # definite failure after which the model may call again.
            raise ToolOutcomeUnknown(
                f"{name}: the server cancelled task {safe_repr(state.task_id)}{said}; what it "
                "did before it stopped is not known: it may have acted",
                **ids,
            )
        # "failed" is the server's own report of an error in executing the call, as a JSON-RPC
        # error reply would be: a definite failure (docs/guarantee.md, outcome of one call).
        raise ToolError(f"{name} failed: its task failed{said}", **ids)

    async def _get_task(self, name: str, task_id: str, ids: dict[str, str]) -> T.TaskState:
        sdk = self._connected()
        request = T.GetTask(params=T.TaskParams(task_id=task_id))
        try:
            raw = (await sdk.send_request(request, _Raw)).root
        except MCPError as exc:
            self._note_failure(exc)
            raise ToolOutcomeUnknown(
                f"{name}: polling task {safe_repr(task_id)} failed (error {exc.error.code}: "
                f"{_server_text(exc.error.message)}){self._why()}; it may have run",
                **ids,
            ) from exc
        except Exception as exc:
            raise ToolOutcomeUnknown(
                f"{name}: the answer to polling task {safe_repr(task_id)} could not be read "
                f"({type(exc).__name__}); it may have run",
                **ids,
            ) from exc
        return T.read_task_state(raw, task_id, server=self._name)

    async def _cancel_task(self, task_id: str) -> None:
        """Ask the server to cancel a task (``tasks/cancel``); what it did already stays done."""
        sdk = self._connected()
        if self._closed:
            raise ProtocolError(f"cannot cancel task {safe_repr(task_id)}: the session is closed")
        await sdk.send_request(T.CancelTask(params=T.TaskParams(task_id=task_id)), _Raw)

    async def _send_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any] | None,
        call: ToolContext | None,
        active: _Active,
        start: tuple[dict[str, types.InputResponse] | None, str | None, int] | None = None,
    ) -> types.CallToolResult | T.TaskState:
        sdk = self._connected()
        ids = _ids(call)
        responses, state, first = start if start is not None else (None, None, 1)
        backoff = _STATE_ONLY_BACKOFF[0]
        for n in range(first, MAX_INPUT_ROUNDS + 2):
            if n > 1 and active.rounds and call is not None:
                # A further request of a side effect is about to leave: journaled first, so a
                # crash before its reply is recorded is an unknown outcome, never a re-send.
                await call.record_handle({"mcp_sending": n}, in_flight=True)
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(
                    name=name,
                    arguments=arguments,
                    input_responses=responses,
                    request_state=state,
                    _meta=meta,  # type: ignore[arg-type]
                )
            )
            sent = _Round(active=active)
            token = _ROUND.set(sent)
            try:
                # Not sdk.call_tool: it validates structured content against the listed output
                # schema and raises RuntimeError after the tool ran, and may re-list first.
                raw = (await sdk.send_request(request, _Raw)).root
                task = raw if self._tasks and raw.get("resultType") == "task" else None
                if task is None:
                    answer = _CALL_RESULT.validate_python(raw)
            except MCPError as exc:
                from_server = self._sent_by_server(sent, exc)
                if not from_server:
                    self._note_failure(exc)
                raise _classify_error_reply(name, exc, ids, from_server, self._why()) from exc
            except pydantic.ValidationError as exc:
                if any("requestState" in map(str, error["loc"]) for error in exc.errors()):
                    # The state is echoed byte for byte on the next round: only a string can be.
                    raise ProtocolError(
                        f"MCP server {self._name!r} answered {name} with a requestState that is "
                        "not a string; the tool may have acted in earlier rounds"
                    ) from exc
                raise ToolOutcomeUnknown(
                    f"{name}: the server's answer could not be read ({type(exc).__name__}); "
                    "the tool may have run",
                    **ids,
                ) from exc
            except Exception as exc:
                raise ToolOutcomeUnknown(
                    f"{name}: the server's answer could not be read ({type(exc).__name__}); "
                    "the tool may have run",
                    **ids,
                ) from exc
            finally:
                _ROUND.reset(token)
                self._forget(sent)
            if task is not None:
                # Outside the try: a task answer that breaks the extension names the server.
                return T.read_task_answer(task, server=self._name, tool=name)
            if isinstance(answer, types.CallToolResult):
                return answer
            if active.rounds and call is not None and _all_forms(answer.input_requests):
                # The server's question, journaled as received before it is asked: the run
                # pauses for the answer, and a resume sends it with this very state.
                asked = {
                    "round": n,
                    "requests": raw.get("inputRequests") or {},
                    "state": answer.request_state,
                }
                await call.record_handle({"mcp_input": asked})
                responses = await self._answer_round(name, asked, active)
                state = answer.request_state
                continue
            if answer.input_requests:
                backoff = _STATE_ONLY_BACKOFF[0]
                responses = await self._answer_input_requests(name, answer.input_requests, active)
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _STATE_ONLY_BACKOFF[1])
                responses = None
            state = answer.request_state
        raise ToolOutcomeUnknown(
            f"{name}: the server kept asking for input past {MAX_INPUT_ROUNDS} rounds; "
            "the tool may have acted in earlier rounds",
            **ids,
        )

    async def _answer_round(
        self, name: str, journaled: Mapping[str, Any], active: _Active
    ) -> dict[str, types.InputResponse]:
        """The answers to a journaled round's questions, from the journal; with any missing the
        run pauses (``Interrupted``) and the call is continued from the round once answered."""
        assert active.call is not None
        n = int(journaled["round"])
        requests = journaled.get("requests") or {}
        responses: dict[str, types.InputResponse] = {}
        for key in sorted(requests):
            request = _INPUT_REQUEST.validate_python(requests[key])
            assert isinstance(request, types.ElicitRequest)
            params = request.params
            assert isinstance(params, types.ElicitRequestFormParams)
            digest = hashlib.sha256(key.encode()).hexdigest()[:12]
            content = await active.call.interrupt(
                f"mcp-input-{n}-{digest}",
                params.message,
                expect=dict,
                schema=dict(params.requested_schema or {"type": "object"}),
            )
            responses[key] = types.ElicitResult(action="accept", content=content)
        return responses

    async def _answer_input_requests(
        self, name: str, requests: Mapping[str, types.InputRequest], active: _Active
    ) -> dict[str, types.InputResponse]:
        ids = _ids(active.call)
        responses: dict[str, types.InputResponse] = {}
        for key, request in requests.items():
            try:
                response = await self._answer_input_request(key, request, name, active)
            except Exception as exc:
                raise ToolOutcomeUnknown(
                    f"{name}: answering the server's input request failed "
                    f"({type(exc).__name__}); the tool may have acted in earlier rounds",
                    **ids,
                ) from exc
            if isinstance(response, types.ErrorData):
                raise ToolOutcomeUnknown(
                    f"{name}: the server asked for input the host could not give "
                    f"({_server_text(response.message)}); the tool may have acted in earlier "
                    "rounds",
                    **ids,
                )
            responses[key] = response
        return responses

    async def _answer_input_request(
        self, key: str, request: types.InputRequest, name: str, active: _Active
    ) -> types.InputResponse | types.ErrorData:
        sdk = self._connected()
        if isinstance(request, types.ElicitRequest) and (
            self._resolver is not None or active.durable
        ):
            return await self._answer_elicitation(request.params, tool_name=name, active=active)
        meta = request.params.meta if request.params is not None else None
        context = ClientRequestContext(session=sdk, request_id=key, meta=meta)
        return await sdk.dispatch_input_request(context, request)

    # -- elicitation -------------------------------------------------------------------------

    async def _elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        """The one route every elicitation takes to the host's resolver."""
        if self._resolver is None:
            return ElicitationAnswer.decline()
        return await self._resolver(request)

    async def _answer_elicitation(
        self,
        params: types.ElicitRequestParams,
        *,
        tool_name: str | None,
        active: _Active | None,
        in_call_task: bool = True,
    ) -> types.ElicitResult:
        call = active.call if active is not None else None
        request = _elicitation_request(params, tool_name=tool_name, call=call)
        if active is not None and active.durable and call is not None and request.mode == "form":
            return await _from_journal(active, request, raise_pause=in_call_task)
        try:
            answer = await self._elicit(request)
            if not isinstance(answer, ElicitationAnswer):
                raise TypeError(f"a resolver must return an ElicitationAnswer, not {answer!r}")
            content = dict(answer.content) if answer.content is not None else None
            return types.ElicitResult(action=answer.action, content=content)
        except Exception as exc:
            # No answer was given: say so with "cancel", which every server must handle, so the
            # call still ends in the server's own final answer instead of an unknown outcome.
            log.warning("mcp_elicitation_failed", tool=tool_name, error=repr(exc))
            return types.ElicitResult(action="cancel")

    async def _on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        # Handshake era: the request arrives on the connection, not within the call it serves;
        # it is traced to a call only when exactly one is in flight.
        active = self._active[0] if len(self._active) == 1 else None
        name = active.call.tool_name if active is not None and active.call is not None else None
        return await self._answer_elicitation(
            params, tool_name=name, active=active, in_call_task=False
        )

    # -- notifications and lifecycle ----------------------------------------------------------

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tool_list_changed()
        elif isinstance(message, Exception):
            log.warning("mcp_transport_error", error=repr(message))

    def _tool_list_changed(self) -> None:
        if self._on_tool_list_changed is None:
            return
        if self._task_group is None or self._closed:
            log.debug("mcp_tool_list_changed_dropped")
            return
        # Run apart from the SDK's receive path, so that the callback may list tools again.
        self._task_group.start_soon(self._run_tool_list_changed)

    async def _run_tool_list_changed(self) -> None:
        assert self._on_tool_list_changed is not None
        try:
            outcome = self._on_tool_list_changed()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            log.warning("mcp_tool_list_changed_callback_failed", error=repr(exc))

    async def _listen_for_tool_list_changes(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """From 2026-07-28 a changed tool list reaches only an open subscription; hold one."""
        sdk = self._connected()
        started = False
        try:
            async with AsyncExitStack() as stack:
                with anyio.move_on_after(_LISTEN_ACK_TIMEOUT) as waiting:
                    subscription = await stack.enter_async_context(
                        listen(sdk, tools_list_changed=True)
                    )
                if waiting.cancelled_caught:
                    log.warning("mcp_listen_not_acknowledged")
                    return
                task_status.started()
                started = True
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self._tool_list_changed()
        except Exception as exc:
            # A failure here must not reach the task group, which would cancel the host's block.
            log.warning("mcp_listen_ended", error=repr(exc))
        finally:
            if not started:
                task_status.started()

    def _attach(self, sdk: ClientSession, task_group: anyio.abc.TaskGroup) -> None:
        self._sdk = sdk
        self._task_group = task_group

    def _mark_closed(self) -> None:
        self._closed = True

    def _fail(self, failure: ProtocolError) -> None:
        """The transport broke the protocol: the session is closed, and says why from now on."""
        if self._failure is None:
            self._failure = failure
        self._closed = True
        log.warning("mcp_session_failed", error=str(failure))

    def _why(self) -> str:
        return f" ({self._failure})" if self._failure is not None else ""

    # -- where an error came from ------------------------------------------------------------

    def _trace_errors(self) -> None:
        """The transport reports every error reply the server itself sent (``_server_error``)."""
        self._traces_errors = True

    def _sending(self, message: object) -> None:
        """A message is leaving: note the id of a tools/call, for the call that sends it."""
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call":
            key = str(message.id)
            sent = _ROUND.get() or _Round()
            sent.request_id = key
            self._calls_sent[key] = sent

    def _received(self, item: object) -> object:
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
        for active in self._active:
            active.cannot_read(why)

    def _server_error(self, request_id: object, code: int, message: str) -> None:
        key = str(request_id)
        if key in self._calls_sent:
            self._server_errors[key] = (code, message)

    def _sent_by_server(self, sent: _Round, exc: MCPError) -> bool | None:
        """Whether the server itself sent this error; ``None`` when the transport cannot say."""
        if not self._traces_errors:
            return None
        if sent.request_id is None:
            return False
        return self._server_errors.get(sent.request_id) == (exc.error.code, exc.error.message)

    def _forget(self, sent: _Round) -> None:
        if sent.request_id is not None:
            self._calls_sent.pop(sent.request_id, None)
            self._server_errors.pop(sent.request_id, None)

    def _note_failure(self, exc: MCPError) -> None:
        # The SDK's own spelling of a closed connection; a server echoing it only makes later
        # calls refuse early, which is safe.
        if exc.error.code == types.CONNECTION_CLOSED and exc.error.message == "Connection closed":
            self._closed = True

    def _connected(self) -> ClientSession:
        if self._sdk is None:
            raise ConfigError("this MCP session is not connected; use it inside `connect(...)`")
        return self._sdk


async def _within(
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
        _retrieve(task)
        raise
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
        if task.cancelled() or task.exception() is not None:
            _retrieve(task)
            raise ToolOutcomeUnknown(
                f"{name} did not answer within {seconds:g} s; it may still be running", **ids
            )
    return task.result()


def _unreadable_text(problem: Exception) -> str:
    if isinstance(problem, UnreadableMessage):
        return str(problem)
    if isinstance(problem, pydantic.ValidationError):
        return f"not a JSON-RPC message: {_brief_validation(problem)}"
    return f"{type(problem).__name__}: {safe_repr(str(problem), 200)}"


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _classify_error_reply(
    name: str, exc: MCPError, ids: dict[str, str], from_server: bool | None, why: str = ""
) -> ToolError:
    """A server's own error reply is a definite failure; one the client made up is unknown.

    ``from_server`` is ``None`` when the transport cannot say where the error came from; then
    the codes the SDK also makes up count as unknown.
    """
    code, text = exc.error.code, _server_text(exc.error.message)
    if from_server is False:
        return ToolOutcomeUnknown(
            f"{name}: the answer was lost (the client reported error {code}: {text}){why}; "
            "the tool may have run",
            **ids,
        )
    if from_server is None and code in _AMBIGUOUS_CODES:
        return ToolOutcomeUnknown(
            f"{name}: error {code} ({text}) is also how the SDK reports a lost or unreadable "
            "answer; the tool may have run",
            **ids,
        )
    return ToolError(f"{name} failed: {text} (JSON-RPC error {code})", **ids)


async def _from_journal(
    active: _Active, request: ElicitationRequest, *, raise_pause: bool
) -> types.ElicitResult:
    """Answer a retry-safe call's elicitation from the run's journal, or pause the run.

    The question is an interrupt of the call, keyed by its order within the call and a digest of
    what was asked, so a re-run that asks the same questions gets the journaled answers.
    """
    assert active.call is not None
    active.asked += 1
    asked = json.dumps(
        {"message": request.message, "schema": request.requested_schema}, sort_keys=True
    )
    key = f"mcp-elicit-{active.asked}-{hashlib.sha256(asked.encode()).hexdigest()[:12]}"
    schema = dict(request.requested_schema or {"type": "object"})
    try:
        content = await active.call.interrupt(key, request.message, expect=dict, schema=schema)
    except Interrupted as pause:
        if raise_pause:
            raise
        active.paused = pause
        return types.ElicitResult(action="cancel")
    return types.ElicitResult(action="accept", content=content)


def _elicitation_request(
    params: types.ElicitRequestParams, *, tool_name: str | None, call: ToolContext | None
) -> ElicitationRequest:
    if isinstance(params, types.ElicitRequestURLParams):
        return ElicitationRequest(
            message=params.message,
            mode="url",
            url=params.url,
            elicitation_id=params.elicitation_id,
            tool_name=tool_name,
            call=call,
        )
    return ElicitationRequest(
        message=params.message,
        mode="form",
        requested_schema=dict(params.requested_schema),
        tool_name=tool_name,
        call=call,
    )


_INPUT_REQUEST: Final = pydantic.TypeAdapter[types.InputRequest](types.InputRequest)


def _all_forms(requests: Mapping[str, types.InputRequest] | None) -> bool:
    """Whether every input request is a form elicitation (a question a person can answer)."""
    return bool(requests) and all(
        isinstance(r, types.ElicitRequest) and isinstance(r.params, types.ElicitRequestFormParams)
        for r in (requests or {}).values()
    )


def _ids(call: ToolContext | None) -> dict[str, str]:
    return {"run_id": call.run_id, "call_id": call.call_id} if call is not None else {}


def _server_text(text: str) -> str:
    """Untrusted text from the server, bounded, for an error the model reads.

    Host-facing errors quote server text with ``safe_repr`` instead.
    """
    if len(text) <= _MAX_SERVER_TEXT:
        return text
    return f"{text[:_MAX_SERVER_TEXT]}... ({len(text)} chars)"


def _brief_validation(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(safe_repr(part, 32).strip('"') for part in error["loc"])
        parts.append(f"{where or 'result'}: {error['msg']}")
    return "; ".join(parts)
