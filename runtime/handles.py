"""Handles: a side effect's progress, journaled mid-attempt (``records.Handle``), so that a
resume continues the attempt through the tool's ``resume`` instead of halting, and a cancelled
run asks the tool to stop the effect. ``Calls`` resumes; this module writes and cancels."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from runtime import records as R
from runtime.drive import Drive, Misuse
from runtime.errors import ConfigError, ToolOutcomeUnknown
from runtime.jsontext import unstorable
from runtime.logs import get_logger
from runtime.state import CallState
from runtime.tools import Safety, ToolContext, handle_canceller

__all__ = ["HANDLE_CANCEL_TIMEOUT", "cancel_handles", "handle_recorder"]

log = get_logger(__name__)

HANDLE_CANCEL_TIMEOUT = 30.0
"""Seconds a tool without a timeout of its own gets to ask for a handle's effect to stop."""


def handle_recorder(
    drive: Drive, cs: CallState, k: int, safety: Safety
) -> Callable[..., Awaitable[bool]]:
    """The call's ``ToolContext.record_handle``: journal the next step of attempt ``k``."""
    return _HandleRecorder(drive, cs, k, safety)


class _HandleRecorder:
    """``handle_recorder``'s callable: one object per call, where a closure would be a function
    and a cell per name it captures, each walked by the cyclic collector while calls run."""

    __slots__ = ("cs", "drive", "k", "safety")

    def __init__(self, drive: Drive, cs: CallState, k: int, safety: Safety):
        self.drive = drive
        self.cs = cs
        self.k = k
        self.safety = safety

    async def __call__(self, value: Any, *, in_flight: bool = False) -> bool:
        if self.safety is not Safety.SIDE_EFFECT:
            return False  # a retry-safe call runs again after a crash: no handle needed
        drive, cs, k = self.drive, self.cs, self.k
        call = cs.call
        problem = unstorable(value, name="handle")
        if problem is not None:
            raise Misuse(
                ConfigError(
                    f"tool {call.name} journaled a handle that cannot be stored: {problem}",
                    run_id=drive.run_id,
                    call_id=call.id,
                )
            )
        n = max(cs.handles.get(k, {}), default=0) + 1
        handle = R.Handle(
            call_id=call.id, attempt=k, n=n, tool=call.name, value=value, in_flight=in_flight
        )
        # Evidence of what the effect did, so kept whatever happened to the run meanwhile.
        appended = await drive.append(
            R.handle_key(call.id, k, n), R.HANDLE, handle.to_payload(), after_end=True
        )
        if not appended.won:
            # Another writer journaled this step: nothing more may leave from here.
            raise ToolOutcomeUnknown(
                f"{call.name}: step {n} of attempt {k} was journaled by another driver",
                run_id=drive.run_id,
                call_id=call.id,
            )
        log.info(
            "tool_handle_recorded",
            call_id=call.id,
            tool=call.name,
            attempt=k,
            step=n,
            in_flight=in_flight,
        )
        return True


async def cancel_handles(
    drive: Drive,
    pending: list[CallState],
    context: Callable[[CallState, int, Safety], ToolContext],
) -> None:
    """The run is being cancelled: ask each tool with a journaled handle and no result to
    stop its effect (an MCP tool sends ``tasks/cancel``). Best effort and journaled by
    nothing: a cancel does not prove the work never ran, so the call stays unresolved."""
    for cs in pending:
        handle = cs.handle if cs.result is None else None
        tool = drive.agent.tools.get(cs.call.name)
        cancel = handle_canceller(tool) if handle is not None and tool is not None else None
        if handle is None or tool is None or cancel is None:
            continue
        ctx = context(cs, cs.attempt, Safety.SIDE_EFFECT)
        try:
            async with asyncio.timeout(tool.spec.timeout or HANDLE_CANCEL_TIMEOUT):
                await cancel(handle.value, ctx)
        except Exception as exc:
            log.warning(
                "tool_cancel_failed", call_id=cs.call.id, tool=cs.call.name, error=repr(exc)
            )
            continue
        log.warning(
            "tool_cancel_requested",
            call_id=cs.call.id,
            tool=cs.call.name,
            note="a cancel does not prove the work never ran; the call stays unresolved",
        )
