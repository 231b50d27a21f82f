"""Elicitation as bide sees it: a server's request for input, the host's answer, the resolver type.

These are bide's own types; the session converts them to and from the MCP SDK's models, so a
resolver never touches an SDK object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime.tools import ToolContext

__all__ = [
    "ElicitationAnswer",
    "ElicitationRequest",
    "ElicitationResolver",
    "decline_elicitation",
]


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server asks the host for input while one of its tools runs.

    ``mode`` is ``"form"`` (answer with ``content`` fitting ``requested_schema``, a flat object
    schema) or ``"url"`` (send the person to ``url``; the answer carries no content). Everything
    here comes from the server and is untrusted.

    ``tool_name`` and ``call`` name the tool call that asked. They are set when the request comes
    embedded in the call's own answer (protocol 2026-07-28, SEP-2322 input requests). In the
    handshake era the server sends ``elicitation/create`` on the connection, not within the call,
    so they are ``None``.
    """

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: Mapping[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    tool_name: str | None = None
    call: ToolContext | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """The host's answer: ``accept`` (with ``content`` in form mode), ``decline`` or ``cancel``.

    ``content`` values are what MCP allows in a form: strings, numbers, booleans, lists of
    strings, or ``None``.
    """

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationAnswer:
        return cls("accept", dict(content) if content is not None else None)

    @classmethod
    def decline(cls) -> ElicitationAnswer:
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationAnswer:
        return cls("cancel")


ElicitationResolver = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]
"""Answers a server's elicitation live, while the tool call that asked is still running.

A resolver that raises, or returns something other than an ``ElicitationAnswer``, is answered
to the server as ``cancel`` (no choice made); the failure is logged.
"""


async def decline_elicitation(request: ElicitationRequest) -> ElicitationAnswer:
    """A resolver that declines every request: for a host with no way to ask a person."""
    return ElicitationAnswer.decline()
