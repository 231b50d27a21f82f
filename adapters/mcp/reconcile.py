"""An MCP side effect reconciled by a lookup tool of the same server.

``tools(session, reconcile={"charge": "find_charge"})`` gives ``charge`` a reconciler that calls
``find_charge`` with the halted call's idempotency key (as ``idempotency_key``, and in ``_meta``)
and those of its original arguments that the lookup's input schema names. The lookup answers,
as structured content or as one text block of JSON:

- ``{"found": true, "value": ..., "evidence": "..."}``: the effect happened; ``value`` (default:
  the whole answer) is the result the model will see;
- ``{"found": false, "evidence": "..."}``: it did not happen, as far as the server can tell;
- anything else, an error result or a failed call: unknown.

A host whose lookup speaks otherwise passes its own function instead of the tool's name:
``reconcile={"charge": my_reconciler}`` (an ``async def(attempt) -> Found | Absent | Unknown``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.jsontext import parse_json
from runtime.reconcile import Absent, Attempt, Found, Reconciler, Unknown
from runtime.tools import Safety, Tool, ToolContext

__all__ = ["lookup_reconciler", "read_lookup"]


def lookup_reconciler(lookup: Tool) -> Reconciler:
    """A reconciler that asks ``lookup`` (an MCP tool of the same server) about an attempt."""
    name = lookup.spec.name
    properties = lookup.spec.input_schema.get("properties")
    accepted = set(properties) if isinstance(properties, Mapping) else None

    async def reconcile(attempt: Attempt) -> Found | Absent | Unknown:
        given = dict(attempt.arguments) if isinstance(attempt.arguments, Mapping) else {}
        given["idempotency_key"] = attempt.idempotency_key
        arguments = {k: v for k, v in given.items() if accepted is None or k in accepted}
        context = ToolContext(
            run_id=attempt.run_id,
            call_id=attempt.call_id,
            tool_name=name,
            safety=Safety.READ_ONLY,
            idempotency_key=attempt.idempotency_key,
        )
        try:
            answer = await lookup.call(arguments, context)
        except ToolError as exc:  # an error result, a timeout, a lost connection
            return Unknown(f"{name} failed: {exc}")
        return read_lookup(answer, lookup=name, key=attempt.idempotency_key)

    reconcile.__name__ = name
    reconcile.__qualname__ = name
    return reconcile


def read_lookup(answer: Any, *, lookup: str, key: str) -> Found | Absent | Unknown:
    """The lookup's answer by the convention above; the evidence names the key looked up."""
    data = _object(answer)
    if data is None or not isinstance(data.get("found"), bool):
        return Unknown(f"{lookup} answered without a found: true|false object: {_clip(answer)}")
    said = data.get("evidence")
    evidence = f"{lookup} for key {key}: {said if isinstance(said, str) else _clip(data)}"
    if data["found"]:
        return Found(data.get("value", data), evidence)
    return Absent(evidence)


def _object(answer: Any) -> dict[str, Any] | None:
    if isinstance(answer, dict):
        return answer
    if (
        isinstance(answer, list)
        and len(answer) == 1
        and isinstance(answer[0], dict)
        and answer[0].get("type") == "text"
    ):
        try:
            parsed = parse_json(str(answer[0].get("text", "")))
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _clip(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}..."
