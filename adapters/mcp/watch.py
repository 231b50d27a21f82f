"""Tool-list changes: the server's notification (handshake era) or a ``subscriptions/listen``
stream held open (from 2026-07-28), turned into calls of the host's callback, apart from the
connection's receive path."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Final, TypeAlias

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import ToolsListChanged, listen

from adapters.mcp.link import Link
from runtime.logs import get_logger

__all__ = ["ToolListChangedCallback", "ToolListWatch"]

log = get_logger(__name__)

ToolListChangedCallback: TypeAlias = Callable[[], Awaitable[None] | None]
"""Called with no arguments when the server says its tool list changed; may be async."""

_LISTEN_ACK_TIMEOUT: Final = 10.0
"""Seconds to wait for a 2026-07-28 server to acknowledge the tool-list subscription."""


class ToolListWatch:
    """Calls ``callback`` each time the server says its tool list changed."""

    def __init__(self, link: Link, callback: ToolListChangedCallback | None) -> None:
        self._link = link
        self._callback = callback
        self._task_group: anyio.abc.TaskGroup | None = None

    def attach(self, task_group: anyio.abc.TaskGroup) -> None:
        self._task_group = task_group

    async def on_message(self, message: IncomingMessage) -> None:
        """The SDK's message handler: server notifications, and transport exceptions."""
        if isinstance(message, types.ToolListChangedNotification):
            self._changed()
        elif isinstance(message, Exception):
            log.warning("mcp_transport_error", error=repr(message))

    def _changed(self) -> None:
        if self._callback is None:
            return
        if self._task_group is None or self._link.closed:
            log.debug("mcp_tool_list_changed_dropped")
            return
        # Run apart from the SDK's receive path, so that the callback may list tools again.
        self._task_group.start_soon(self._run_callback)

    async def _run_callback(self) -> None:
        assert self._callback is not None
        try:
            outcome = self._callback()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            log.warning("mcp_tool_list_changed_callback_failed", error=repr(exc))

    async def listen(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """From 2026-07-28 a changed tool list reaches only an open subscription; hold one."""
        sdk = self._link.connected()
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
                        self._changed()
        except Exception as exc:
            # A failure here must not reach the task group, which would cancel the host's block.
            log.warning("mcp_listen_ended", error=repr(exc))
        finally:
            if not started:
                task_status.started()
