"""A tool call on an MCP session, with its SEP-2322 input rounds: sending it, reading the
answer, telling a server's definite failure from a lost answer, and answering the rounds (live,
or, for a side effect made with durable elicitation, journaled and answered from the journal).

A call the server takes as a task goes on in ``adapters.mcp.tasks``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Mapping
from typing import Any, Final

import mcp_types as types
import pydantic
from mcp import MCPError
from mcp.client.session import ClientRequestContext

from adapters.mcp.answering import Elicitor
from adapters.mcp.auth import call_refused
from adapters.mcp.link import Active, Link, Sent, ids_of, server_text, within
from adapters.mcp.tasks import TaskState, follow_task, handle_of, read_task_answer
from runtime.errors import ProtocolError, ToolError, ToolOutcomeUnknown
from runtime.logs import get_logger
from runtime.tools import ToolContext

__all__ = ["MAX_INPUT_ROUNDS", "Caller", "classify_error_reply"]

log = get_logger(__name__)

MAX_INPUT_ROUNDS: Final = 10
"""Rounds of SEP-2322 input requests one call may take before its outcome is called unknown."""

_STATE_ONLY_BACKOFF: Final = (0.05, 0.25)
"""First and longest pause before re-sending a call the server answered with only request state."""

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


class Caller:
    """Makes tool calls on one connection, answering their input rounds through ``elicitor``."""

    def __init__(self, link: Link, elicitor: Elicitor) -> None:
        self._link = link
        self._elicitor = elicitor

    async def call_tool(
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
        ids = ids_of(call)
        if self._link.closed and resume is not None:
            raise ToolOutcomeUnknown(
                f"{name}: its journaled input round cannot be continued, the MCP session is "
                f"closed{self._link.why()}; earlier rounds may have acted",
                **ids,
            )
        if self._link.closed:
            raise ToolError(
                f"{name} was not called: the MCP session is closed{self._link.why()}", **ids
            )
        active = Active(call, durable, rounds=rounds and call is not None)
        self._link.active.append(active)
        try:
            attempt = self._unless_unreadable(
                name,
                active,
                self._run_call(name, arguments, meta=meta, call=call, active=active, resume=resume),
            )
            answer = await (attempt if seconds is None else within(attempt, seconds, name, ids))
        finally:
            self._link.active.remove(active)
        if active.paused is not None:
            # A handshake-era question was journaled and answered "cancel" to the server; what
            # the call returned after that is discarded, and the call runs again when answered.
            raise active.paused
        return answer

    async def _unless_unreadable(
        self, name: str, active: Active, attempt: Awaitable[types.CallToolResult]
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
                **ids_of(active.call),
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
        active: Active,
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
            await call.record_handle(handle_of(answer.task_id, self._link.name))
        log.info("mcp_task_started", tool=name, task=answer.task_id, status=answer.status)
        return await follow_task(self._link, name, answer, ids_of(call))

    async def _send_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any] | None,
        call: ToolContext | None,
        active: Active,
        start: tuple[dict[str, types.InputResponse] | None, str | None, int] | None = None,
    ) -> types.CallToolResult | TaskState:
        self._link.connected()
        ids = ids_of(call)
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
            sent = Sent(active=active)
            token = self._link.sending_as(sent)
            try:
                # Not sdk.call_tool: it validates structured content against the listed output
                # schema and raises RuntimeError after the tool ran, and may re-list first.
                raw = await self._link.request(request)
                task = raw if self._link.tasks and raw.get("resultType") == "task" else None
                if task is None:
                    answer = _CALL_RESULT.validate_python(raw)
            except MCPError as exc:
                refusal = self._link.refusal(sent)
                if refusal is not None:
                    raise self._refused(name, refusal, ids, first_round=n == 1) from exc
                from_server = self._link.sent_by_server(sent, exc)
                if not from_server:
                    self._link.note_failure(exc)
                raise classify_error_reply(name, exc, ids, from_server, self._link.why()) from exc
            except pydantic.ValidationError as exc:
                if any("requestState" in map(str, error["loc"]) for error in exc.errors()):
                    # The state is echoed byte for byte on the next round: only a string can be.
                    raise ProtocolError(
                        f"MCP server {self._link.name!r} answered {name} with a requestState "
                        "that is not a string; the tool may have acted in earlier rounds"
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
                self._link.reset(token)
                self._link.forget(sent)
            if task is not None:
                # Outside the try: a task answer that breaks the extension names the server.
                return read_task_answer(task, server=self._link.name, tool=name)
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

    def _refused(
        self, name: str, refusal: tuple[int, str | None], ids: dict[str, str], *, first_round: bool
    ) -> ToolError:
        """The server answered this tools/call's own POST with 401 or 403: it refused the
        request before acting. The first request of a call: a definite failure, nothing ran. A
        later round's: earlier rounds may have acted, so the outcome is unknown."""
        status, challenge = refusal
        refused = call_refused(
            name,
            status,
            challenge,
            server=self._link.name,
            credentials=self._link.credentials,
            ids=ids,
        )
        if first_round:
            return refused
        return ToolOutcomeUnknown(
            f"{name}: MCP server {self._link.name!r} refused a later input round of the call "
            f"with HTTP {status} ({refused.challenge or 'no challenge'}); earlier rounds may "
            "have acted",
            **ids,
        )

    async def _answer_round(
        self, name: str, journaled: Mapping[str, Any], active: Active
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
        self, name: str, requests: Mapping[str, types.InputRequest], active: Active
    ) -> dict[str, types.InputResponse]:
        ids = ids_of(active.call)
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
                    f"({server_text(response.message)}); the tool may have acted in earlier "
                    "rounds",
                    **ids,
                )
            responses[key] = response
        return responses

    async def _answer_input_request(
        self, key: str, request: types.InputRequest, name: str, active: Active
    ) -> types.InputResponse | types.ErrorData:
        sdk = self._link.connected()
        if isinstance(request, types.ElicitRequest) and (
            self._elicitor.resolver is not None or active.durable
        ):
            return await self._elicitor.answer(request.params, tool_name=name, active=active)
        meta = request.params.meta if request.params is not None else None
        context = ClientRequestContext(session=sdk, request_id=key, meta=meta)
        return await sdk.dispatch_input_request(context, request)


def classify_error_reply(
    name: str, exc: MCPError, ids: dict[str, str], from_server: bool | None, why: str = ""
) -> ToolError:
    """A server's own error reply is a definite failure; one the client made up is unknown.

    ``from_server`` is ``None`` when the transport cannot say where the error came from; then
    the codes the SDK also makes up count as unknown.
    """
    code, text = exc.error.code, server_text(exc.error.message)
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


_INPUT_REQUEST: Final = pydantic.TypeAdapter[types.InputRequest](types.InputRequest)


def _all_forms(requests: Mapping[str, types.InputRequest] | None) -> bool:
    """Whether every input request is a form elicitation (a question a person can answer)."""
    return bool(requests) and all(
        isinstance(r, types.ElicitRequest) and isinstance(r.params, types.ElicitRequestFormParams)
        for r in (requests or {}).values()
    )
