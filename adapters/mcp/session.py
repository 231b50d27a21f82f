"""The MCP session bide holds, as ``connect`` yields it, and the parts it is made of.

A ``Session`` is the public handle; the work is done by its parts, each in its own module: the
connection and what crossed the wire (``link``), tool calls and their input rounds
(``rounds``), tasks (``tasks``), answering elicitation (``answering``) and tool-list changes
(``watch``). The adapter's modules reach them through ``parts_of``, never through a session's
private members.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp import ClientSession

from adapters.mcp.answering import Elicitor
from adapters.mcp.elicitation import ElicitationResolver
from adapters.mcp.link import Link
from adapters.mcp.rounds import MAX_INPUT_ROUNDS, Caller
from adapters.mcp.watch import ToolListChangedCallback, ToolListWatch

__all__ = ["MAX_INPUT_ROUNDS", "Parts", "Session", "ToolListChangedCallback", "adopt", "parts_of"]


@dataclass(frozen=True, slots=True)
class Parts:
    """What a session is made of (not part of ``adapters.mcp``'s public API)."""

    link: Link
    elicitor: Elicitor
    caller: Caller
    watch: ToolListWatch


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
        link = Link(name=name, tasks=tasks)
        elicitor = Elicitor(link, elicitation)
        self._parts = Parts(
            link=link,
            elicitor=elicitor,
            caller=Caller(link, elicitor),
            watch=ToolListWatch(link, on_tool_list_changed),
        )

    @property
    def closed(self) -> bool:
        """True once the connection is known closed; later calls are refused, never sent."""
        return self._parts.link.closed

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version, e.g. ``"2025-11-25"`` or ``"2026-07-28"``."""
        return self._parts.link.protocol_version

    @property
    def server_info(self) -> tuple[str, str] | None:
        """The server's ``(name, version)`` as it reported them (untrusted), if it did."""
        sdk = self._parts.link.sdk
        info = sdk.server_info if sdk is not None else None
        return (info.name, info.version) if info is not None else None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<adapters.mcp.Session {state} protocol={self.protocol_version}>"


def parts_of(session: Session) -> Parts:
    """The parts of ``session``: the seam between the adapter's modules."""
    return session._parts


def adopt(sdk: ClientSession) -> Session:
    """Wrap an SDK session the caller already holds; its own callbacks answer input requests."""
    session = Session()
    session._parts.link.sdk = sdk
    return session
