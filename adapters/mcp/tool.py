"""One MCP server tool as a bide Tool: check the arguments, call, turn the answer into a value."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from jsonschema import exceptions as jsonschema_exceptions
from referencing.exceptions import Unresolvable

from adapters.mcp.keys import with_key
from adapters.mcp.session import Parts
from adapters.mcp.tasks import cancel_task, resume_task, task_of
from runtime.errors import ToolArgumentsError, ToolError, ToolOutcomeUnknown
from runtime.tools import ToolContext, ToolSpec, safe_repr

__all__ = [
    "CALL_STEP",
    "DEFAULT_MAX_RESULT_BYTES",
    "IDEMPOTENCY_KEY_META",
    "MCPTool",
    "ResultTooLargeError",
]

DEFAULT_MAX_RESULT_BYTES: Final = 1 << 20
"""The largest result, in bytes of JSON, a call accepts unless ``tools`` is told otherwise: 1 MiB.

A result is journaled and sent back to the model on every later turn of the run; 1 MiB of text
is more than most models' whole context window, so a larger one cannot be used as it is.
"""

CALL_STEP: Final = "mcp_call"
"""The journaled step (a side effect's in-flight handle) naming the server a call went to and
the principal it was made as (``connect``'s ``principal``, or what the authorizer names)."""

IDEMPOTENCY_KEY_META: Final = "dev.bide/idempotency-key"
"""The ``_meta`` key under which every call made with a ``ToolContext`` carries its key."""

_MAX_ARGUMENT_ERROR: Final = 300


class ResultTooLargeError(ToolError):
    """The tool ran; only its result was refused, being larger than the limit.

    ``size`` is the result's size in bytes of compact UTF-8 JSON, ``limit`` the limit it broke.
    """

    def __init__(
        self,
        message: str,
        *,
        size: int,
        limit: int,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id, call_id=call_id)
        self.size = size
        self.limit = limit


class MCPTool:
    """A tool an MCP server listed, called through the session it was listed on."""

    __slots__ = (
        "_durable",
        "_key_argument",
        "_max_result_bytes",
        "_parts",
        "_spec",
        "_validator",
    )

    enforces_timeout: Final = True
    """The call applies ``spec.timeout`` itself and keeps an answer in hand at the deadline, so
    an agent runs it without a deadline of its own (the optional attribute of ``runtime.Tool``)."""

    def __init__(
        self,
        parts: Parts,
        spec: ToolSpec,
        validator: Any,
        *,
        max_result_bytes: int,
        durable_elicitation: bool = False,
        key_argument: str | None = None,
    ) -> None:
        self._key_argument = key_argument
        self._parts = parts
        self._spec = spec
        self._validator = validator
        self._max_result_bytes = max_result_bytes
        self._durable = durable_elicitation

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def reconciled_by(self, reconciler: Any) -> None:
        """Give this SIDE_EFFECT a reconciler (``tools(..., reconcile=...)``)."""
        self._spec = dataclasses.replace(self._spec, reconcile=reconciler)

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        """Call the tool on the server; return its content blocks as JSON (see ``docs/mcp.md``).

        A definite ``ToolError`` means the tool failed or never ran; ``ToolOutcomeUnknown``
        means it may have run and its answer was lost (timeout, lost connection, unreadable
        answer). Cancellation propagates.
        """
        ids = {"run_id": context.run_id, "call_id": context.call_id} if context else {}
        name = self._spec.name
        sent, keyed = self._keyed(arguments, context, ids)
        checked = self._check_arguments(sent, ids)
        if context is not None:
            # Which server the call goes to and as whom (never a credential), and which
            # argument carried bide's key and what the model had put there: journaled (for a
            # side effect, as a step in flight, so a crash from here on still halts) before
            # the request leaves.
            link = self._parts.link
            step = {CALL_STEP: {"server": link.name, "principal": link.principal()}}
            await context.record_handle({**step, **(keyed or {})}, in_flight=True)
        # Every call carries its key, side effects most of all: a server may deduplicate by it,
        # and a reconciler may look a halted call up by it.
        meta = {IDEMPOTENCY_KEY_META: context.idempotency_key} if context is not None else None
        # Only a call the agent may run again from the start can pause on a question: a side
        # effect's elicitation is answered live, never by pausing (that could repeat the effect).
        durable = self._durable and context is not None and context.safety.retry_safe
        # A side effect's 2026-07-28 input rounds are journaled instead: each round is a step
        # of the attempt, and the call is continued from it once answered, never re-run.
        rounds = self._durable and context is not None and not context.safety.retry_safe
        result = await self._parts.caller.call_tool(
            name,
            checked,
            meta=meta,
            call=context,
            seconds=self._spec.timeout,
            durable=durable,
            rounds=rounds,
        )
        return self._value(result, ids)

    async def resume(self, handle: Any, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Continue a call from the step its attempt journaled (``runtime.Tool``), and answer
        as ``call`` does.

        A task (its id journaled): poll it to its end within the tool's timeout; nothing is
        sent again. A task that cannot be polled (the server forgot it, the connection failed,
        the deadline passed) is ``ToolOutcomeUnknown``: the run halts on it, and a later resume
        polls again. An input round (its request state journaled): send the journaled answers
        with the state exactly as the server sent it, or pause again while one is missing.
        """
        ids = {"run_id": context.run_id, "call_id": context.call_id}
        asked = handle.get("mcp_input") if isinstance(handle, Mapping) else None
        if isinstance(asked, Mapping) and self._durable:
            result = await self._parts.caller.call_tool(
                self._spec.name,
                self._check_arguments(self._keyed(arguments, context, ids)[0], ids),
                meta={IDEMPOTENCY_KEY_META: context.idempotency_key},
                call=context,
                seconds=self._spec.timeout,
                rounds=True,
                resume=asked,
            )
            return self._value(result, ids)
        if isinstance(asked, Mapping):
            raise ToolOutcomeUnknown(
                f"{self._spec.name}: the attempt journaled an input round, but this tool was "
                "listed without durable_elicitation and cannot continue it; earlier rounds may "
                "have acted",
                **ids,
            )
        task_id = task_of(handle)
        if task_id is None:
            raise ToolOutcomeUnknown(
                f"{self._spec.name}: the journaled handle {safe_repr(handle)} names no MCP task; "
                "the call may have run",
                **ids,
            )
        result = await resume_task(
            self._parts.link, self._spec.name, task_id, call=context, seconds=self._spec.timeout
        )
        return self._value(result, ids)

    async def cancel_handle(self, handle: Any, context: ToolContext) -> None:
        """Ask the server to cancel the task behind ``handle`` (``tasks/cancel``), when the run
        is cancelled. It proves nothing: the task may have acted, or finished, already."""
        task_id = task_of(handle)
        if task_id is not None:
            await cancel_task(self._parts.link, task_id)

    def _value(self, result: types.CallToolResult, ids: dict[str, str]) -> Any:
        name = self._spec.name
        value = _result_value(result)
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        if 0 < self._max_result_bytes < size:
            raise ResultTooLargeError(
                f"{name} ran, but its result was refused: {size} bytes of JSON is over the "
                f"{self._max_result_bytes}-byte limit",
                size=size,
                limit=self._max_result_bytes,
                **ids,
            )
        if result.is_error:
            raise ToolError(_error_text(name, value), data=value, **ids)
        return value

    def _keyed(
        self, arguments: Any, context: ToolContext | None, ids: dict[str, str]
    ) -> tuple[Any, dict[str, Any] | None]:
        """The arguments with bide's key in the tool's key argument, if the host named one."""
        if self._key_argument is None or not isinstance(arguments, Mapping):
            return arguments, None
        if context is None:
            raise ToolError(
                f"{self._spec.name} was not called: its argument "
                f"{safe_repr(self._key_argument)} takes bide's idempotency key, and a call "
                "without a ToolContext has none",
                **ids,
            )
        return with_key(arguments, self._key_argument, context.idempotency_key)

    def _check_arguments(self, arguments: object, ids: dict[str, str]) -> dict[str, Any]:
        name = self._spec.name
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(
                f"arguments for {name} must be a JSON object, not {type(arguments).__name__}",
                **ids,
            )
        problem = _not_json(arguments, "arguments")
        if problem is not None:
            raise ToolArgumentsError(f"arguments for {name} are not JSON: {problem}", **ids)
        # A plain copy: what is validated is exactly what is sent.
        checked: dict[str, Any] = _plain(arguments)
        try:
            error = jsonschema_exceptions.best_match(self._validator.iter_errors(checked))
        except Unresolvable as exc:
            raise ToolError(
                f"{name} was not called: its input schema has a $ref that does not resolve", **ids
            ) from exc
        if error is not None:
            raise ToolArgumentsError(
                f"arguments for {name} do not fit its schema at {error.json_path}: "
                f"{_clip(error.message)}",
                **ids,
            )
        return checked

    def __repr__(self) -> str:
        return f"<MCPTool {self._spec.name} {self._spec.safety.value}>"


def _not_json(value: object, where: str) -> str | None:
    """Why ``value`` is not plain JSON (json.dumps would quietly turn 1 into "1" as a key)."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value}"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (problem := _not_json(item, f"{where}[{index}]")) is not None:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key that is not a string: {key!r}"
            if (problem := _not_json(item, f"{where}.{key}")) is not None:
                return problem
        return None
    return f"{where} is a {type(value).__name__}"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _result_value(result: types.CallToolResult) -> Any:
    blocks = [
        block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content
    ]
    if not blocks and result.structured_content is not None:
        return result.structured_content
    return blocks


def _error_text(name: str, value: Any) -> str:
    if (
        isinstance(value, list)
        and value
        and all(isinstance(block, dict) and block.get("type") == "text" for block in value)
    ):
        return "\n".join(str(block.get("text", "")) for block in value)
    if value in ([], None):
        return f"{name} reported an error and said nothing more"
    return json.dumps(value, ensure_ascii=False)


def _clip(text: str) -> str:
    if len(text) <= _MAX_ARGUMENT_ERROR:
        return text
    return f"{text[:_MAX_ARGUMENT_ERROR]}..."
