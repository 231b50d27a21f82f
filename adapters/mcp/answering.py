"""Answering a server's elicitation: every elicitation, whichever protocol era carries it, goes
through ``Elicitor.answer``. For a call made with durable elicitation it is answered from the
run's journal (or pauses the run), otherwise by the host's live resolver.

The resolver sees bide's own types (``adapters.mcp.elicitation``); this module converts them to
and from the SDK's models.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.client.session import ClientRequestContext

from adapters.mcp.elicitation import ElicitationAnswer, ElicitationRequest, ElicitationResolver
from adapters.mcp.link import Active, Link
from runtime.logs import get_logger
from runtime.tools import Interrupted, ToolContext

__all__ = ["Elicitor", "with_defaults"]

log = get_logger(__name__)


class Elicitor:
    """The host's resolver (if any) and the journal, as one way to answer a server's question."""

    def __init__(self, link: Link, resolver: ElicitationResolver | None) -> None:
        self._link = link
        self.resolver = resolver

    async def answer(
        self,
        params: types.ElicitRequestParams,
        *,
        tool_name: str | None,
        active: Active | None,
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
            if answer.action == "accept" and request.mode == "form":
                content = with_defaults(request.requested_schema, content)
            return types.ElicitResult(action=answer.action, content=content)
        except Exception as exc:
            # No answer was given: say so with "cancel", which every server must handle, so the
            # call still ends in the server's own final answer instead of an unknown outcome.
            log.warning("mcp_elicitation_failed", tool=tool_name, error=repr(exc))
            return types.ElicitResult(action="cancel")

    async def on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """The SDK's elicitation callback (the handshake era's ``elicitation/create``)."""
        # The request arrives on the connection, not within the call it serves; it is traced
        # to a call only when exactly one is in flight.
        calls = self._link.active
        active = calls[0] if len(calls) == 1 else None
        name = active.call.tool_name if active is not None and active.call is not None else None
        return await self.answer(params, tool_name=name, active=active, in_call_task=False)

    async def _elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        """The one route every elicitation takes to the host's resolver."""
        if self.resolver is None:
            return ElicitationAnswer.decline()
        return await self.resolver(request)


def with_defaults(
    schema: Mapping[str, Any] | None, content: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """An accepted form's content with the schema's defaults for what the host left out
    (SEP-1034): a resolver that accepts without content accepts the defaults. What the host
    gave always wins; a property without a default stays out."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return dict(content) if content is not None else None
    filled = {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, Mapping) and "default" in prop
    }
    filled.update(content or {})
    return filled if filled or content is not None else None


async def _from_journal(
    active: Active, request: ElicitationRequest, *, raise_pause: bool
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
