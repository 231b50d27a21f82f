"""The MCP tasks extension as a host speaks it: a task answer and a ``tasks/get`` answer, checked,
and a task polled to its end (``follow_task``; after a crash or a halt, ``resume_task``).

Both are untrusted input: a task id that is missing, empty, overlong or not text, a status
outside the extension's five, a poll interval that is not a count of milliseconds, or a
completed task without a readable result is a ``ProtocolError`` naming the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import mcp_types as types
import pydantic
from mcp import MCPError
from mcp_types import Request, RequestParams

from adapters.mcp.link import Link, ids_of, server_text, within
from runtime.errors import ProtocolError, ToolError, ToolOutcomeUnknown
from runtime.logs import get_logger
from runtime.tools import ToolContext, safe_repr

__all__ = [
    "DEFAULT_POLL_SECONDS",
    "MAX_POLL_SECONDS",
    "MAX_TASK_ID_CHARS",
    "MIN_POLL_SECONDS",
    "TASKS_EXTENSION",
    "CancelTask",
    "GetTask",
    "TaskParams",
    "TaskState",
    "cancel_task",
    "follow_task",
    "handle_of",
    "read_task_answer",
    "read_task_state",
    "resume_task",
    "task_of",
]

log = get_logger(__name__)

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, declared in the client's capabilities when the host opts in."""

MAX_TASK_ID_CHARS: Final = 256
DEFAULT_POLL_SECONDS: Final = 1.0
"""The pause between two ``tasks/get`` when the server suggests none."""
MIN_POLL_SECONDS: Final = 0.05
MAX_POLL_SECONDS: Final = 30.0
"""Bounds on the server's ``pollIntervalMs``: no server makes the host spin, or sleep past its
own deadline checks for long."""

_STATUSES: Final = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
_RESULT: Final = pydantic.TypeAdapter(types.CallToolResult)


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams


@dataclass(frozen=True, slots=True)
class TaskState:
    """One reading of a task: its id, status, the pause the server asks for, and, once it has
    ended, the final result (completed, or a failure the server described) or its message."""

    task_id: str
    status: str
    poll_seconds: float | None
    message: str | None = None
    result: types.CallToolResult | None = None

    @property
    def ended(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")


def handle_of(task_id: str, server: str) -> dict[str, str]:
    """What an MCP tool journals for a call the server answered with a task."""
    return {"mcp_task": task_id, "server": server}


def task_of(handle: object) -> str | None:
    """The task id in a journaled handle, or None if it is not one ``handle_of`` made."""
    if isinstance(handle, Mapping):
        task_id = handle.get("mcp_task")
        if isinstance(task_id, str) and task_id:
            return task_id
    return None


def read_task_answer(raw: Mapping[str, Any], *, server: str, tool: str) -> TaskState:
    """Check a ``tools/call`` answer whose ``resultType`` is ``"task"``.

    The extension as published (SEP-2663) flattens the answer: ``CreateTaskResult`` is the
    result and the task at once, ``taskId``, ``status`` and the task's timings beside
    ``resultType``. The nested shape of the drafts before it (``{"task": {...}}``) is still
    read, for servers built on them; an answer that mixes the two (a top-level ``taskId`` and a
    nested ``task``) is refused, since the two could name different tasks.
    """
    nested = raw.get("task")
    if "taskId" in raw and nested is not None:
        raise _broken(
            server,
            f"answered {tool} with a task both flattened (taskId) and nested (task); "
            "which one is meant cannot be told",
        )
    if isinstance(nested, Mapping):
        return _read_task(nested, server=server, what=f"the task answering {tool} (nested)")
    if nested is not None:
        raise _broken(server, f"answered {tool} with a task whose task field is not an object")
    return _read_task(raw, server=server, what=f"the task answering {tool}")


def read_task_state(raw: Mapping[str, Any], task_id: str, *, server: str) -> TaskState:
    """Check a ``tasks/get`` answer for ``task_id``."""
    state = _read_task(raw, server=server, what=f"tasks/get for task {safe_repr(task_id)}")
    if state.task_id != task_id:
        raise _broken(
            server,
            f"answered tasks/get for task {safe_repr(task_id)} with task "
            f"{safe_repr(state.task_id)}",
        )
    if state.status in ("completed", "failed") and "result" in raw:
        try:
            result = _RESULT.validate_python(raw["result"])
        except pydantic.ValidationError as exc:
            raise _broken(
                server, f"sent a result for task {safe_repr(task_id)} that is not a tool result"
            ) from exc
        return TaskState(state.task_id, state.status, state.poll_seconds, state.message, result)
    if state.status == "completed":
        raise _broken(server, f"says task {safe_repr(task_id)} completed, but sent no result")
    return state


def _read_task(task: Mapping[str, Any], *, server: str, what: str) -> TaskState:
    task_id = task.get("taskId")
    if (
        not isinstance(task_id, str)
        or not task_id
        or len(task_id) > MAX_TASK_ID_CHARS
        or not task_id.isprintable()
    ):
        raise _broken(
            server,
            f"sent {what} with no usable task id (got {safe_repr(task_id)}: a task id is 1 to "
            f"{MAX_TASK_ID_CHARS} printable characters)",
        )
    status = task.get("status")
    if status not in _STATUSES:
        raise _broken(
            server,
            f"sent {what} with status {safe_repr(status)}, not one of "
            f"{', '.join(sorted(_STATUSES))}",
        )
    interval = task.get("pollIntervalMs")
    if interval is not None and (
        isinstance(interval, bool) or not isinstance(interval, int) or interval < 0
    ):
        raise _broken(server, f"sent {what} with pollIntervalMs {safe_repr(interval)}")
    message = task.get("statusMessage")
    return TaskState(
        task_id=task_id,
        status=str(status),
        poll_seconds=None if interval is None else interval / 1000,
        message=message if isinstance(message, str) else None,
    )


def _broken(server: str, text: str) -> ProtocolError:
    return ProtocolError(f"MCP server {server!r} {text}")


async def resume_task(
    link: Link, name: str, task_id: str, *, call: ToolContext, seconds: float | None
) -> types.CallToolResult:
    """Poll a task a crashed or halted attempt journaled, to its end, within ``seconds``."""
    ids = ids_of(call)
    if link.closed:
        raise ToolOutcomeUnknown(
            f"{name}: task {safe_repr(task_id)} cannot be polled, the MCP session is closed"
            f"{link.why()}; it may have run",
            **ids,
        )
    known = TaskState(task_id, "working", None)
    attempt = follow_task(link, name, known, ids, wait_first=False)
    return await (attempt if seconds is None else within(attempt, seconds, name, ids))


async def follow_task(
    link: Link, name: str, state: TaskState, ids: dict[str, str], *, wait_first: bool = True
) -> types.CallToolResult:
    """Poll ``tasks/get`` until the task ends, at the pace the server asks (bounded)."""
    pause, wait = DEFAULT_POLL_SECONDS, wait_first
    while not state.ended:
        if state.status == "input_required":
            raise ToolOutcomeUnknown(
                f"{name}: task {safe_repr(state.task_id)} asks for input, which bide does "
                "not give to a task; it may have acted",
                **ids,
            )
        if state.poll_seconds is not None:
            pause = min(max(state.poll_seconds, MIN_POLL_SECONDS), MAX_POLL_SECONDS)
        if wait:
            await asyncio.sleep(pause)
        wait = True
        state = await _get_task(link, name, state.task_id, ids)
    log.info("mcp_task_ended", tool=name, task=state.task_id, status=state.status)
    if state.result is not None:
        return state.result  # completed, or failed with the server's own isError result
    said = f": {server_text(state.message)}" if state.message else ""
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


async def _get_task(link: Link, name: str, task_id: str, ids: dict[str, str]) -> TaskState:
    link.connected()
    request = GetTask(params=TaskParams(task_id=task_id))
    try:
        raw = await link.request(request)
    except MCPError as exc:
        link.note_failure(exc)
        raise ToolOutcomeUnknown(
            f"{name}: polling task {safe_repr(task_id)} failed (error {exc.error.code}: "
            f"{server_text(exc.error.message)}){link.why()}; it may have run",
            **ids,
        ) from exc
    except Exception as exc:
        raise ToolOutcomeUnknown(
            f"{name}: the answer to polling task {safe_repr(task_id)} could not be read "
            f"({type(exc).__name__}); it may have run",
            **ids,
        ) from exc
    return read_task_state(raw, task_id, server=link.name)


async def cancel_task(link: Link, task_id: str) -> None:
    """Ask the server to cancel a task (``tasks/cancel``); what it did already stays done."""
    link.connected()
    if link.closed:
        raise ProtocolError(f"cannot cancel task {safe_repr(task_id)}: the session is closed")
    await link.request(CancelTask(params=TaskParams(task_id=task_id)))
