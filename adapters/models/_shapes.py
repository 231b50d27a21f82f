"""On the wire, what both provider adapters say alike: tool names a provider accepts, call ids,
a call's arguments (untrusted JSON, bounded) and a result's text, tool entries and their
schemas, the API key and the client's options. ``_wire`` re-exports these names."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runtime.errors import ConfigError, ModelError, ProtocolError
from runtime.jsontext import TooDeep, parse_json
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage
from runtime.redact import declare_secret
from runtime.tools import ToolSpec, safe_repr

__all__ = [
    "CallIds",
    "ToolNames",
    "arguments_json",
    "check_options",
    "json_schema",
    "parse_arguments",
    "resolve_api_key",
    "result_text",
    "tool_entry",
    "wire_name",
]


_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]")


def wire_name(name: str) -> str:
    """The name a provider accepts for a tool: ``[A-Za-z0-9_-]{1,64}``.

    bide's names (the MCP grammar) may hold dots and run to 128 characters; those are rewritten
    with a digest of the full name, so the rewrite is the same in every process and every turn.
    """
    if _WIRE_NAME.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{_NOT_WIRE.sub('_', name)[:55]}_{digest}"


class ToolNames:
    """The two-way map between bide tool names and the names a provider sees, for one request."""

    def __init__(self, tools: Sequence[ToolSpec]):
        self.specs = tuple(tools)
        """The tools offered, in the order given."""
        self._to_wire: dict[str, str] = {}
        self._from_wire: dict[str, str] = {}
        for spec in tools:
            wire = wire_name(spec.name)
            other = self._from_wire.get(wire)
            if other is not None and other != spec.name:
                raise ConfigError(
                    f"tools {other!r} and {spec.name!r} would reach the model under one name "
                    f"{wire!r}; rename one of them"
                )
            self._to_wire[spec.name] = wire
            self._from_wire[wire] = spec.name

    def to_wire(self, name: str) -> str:
        return self._to_wire.get(name) or wire_name(name)

    def from_wire(self, wire: str) -> str:
        """The bide name of a name the model used; an unknown one is kept (the loop refuses it)."""
        return self._from_wire.get(wire, wire)


class CallIds:
    """Hands out the ids of one turn's tool calls: the provider's, unless missing or already used.

    The journal keys results by call id within a run, so an id must be unique across the whole
    conversation. Some OpenAI-compatible servers send none, or count from ``call_0`` every turn;
    those calls get a fresh random id, which the recorded turn keeps from then on.
    """

    def __init__(self, history: Iterable[Message]):
        self._used = {
            call.id for m in history if isinstance(m, AssistantTurn) for call in m.tool_calls
        }

    def assign(self, provider_id: str | None) -> str:
        if (
            provider_id
            and len(provider_id) <= 256
            and provider_id.isprintable()
            and provider_id not in self._used
        ):
            chosen = provider_id
        else:
            chosen = f"call_{secrets.token_hex(12)}"
        self._used.add(chosen)
        return chosen


def parse_arguments(raw: str, *, provider: str, tool: str, finish_reason: str | None) -> Any:
    """A tool call's arguments, from the JSON text the model wrote; they must form an object.

    Anything else is the model breaking the tool protocol: a ``ModelError`` that is not retryable
    (the same request at the same temperature tends to fail the same way). An empty text is the
    empty object, as several servers send for a tool without parameters.
    """
    if not raw.strip():
        return {}
    hint = " (the turn hit max_tokens; raise it)" if finish_reason == "length" else ""
    try:
        value = parse_json(raw, parse_constant=_reject_constant)
    except TooDeep as exc:
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} {exc}: {safe_repr(raw, 80)}",
            retryable=False,
        ) from None
    except ValueError as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} that are not valid JSON{hint}: "
            f"{why} in {safe_repr(raw, 80)}",
            retryable=False,
        ) from exc
    if not isinstance(value, dict):
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} that are not a JSON object: "
            f"{safe_repr(raw, 80)}",
            retryable=False,
        )
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def arguments_json(call: ToolCall) -> str:
    """A recorded call's arguments as the JSON text the model once wrote (re-encoded)."""
    try:
        return json.dumps(call.arguments, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"the arguments of call {call.id} ({call.name}) are not JSON: {exc}",
            call_id=call.id,
        ) from exc


def result_text(message: ToolResultMessage) -> str:
    """A tool result as the text the model reads: strings as they are, other values as JSON."""
    content = message.content
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"the result of call {message.call_id} ({message.name}) is not JSON: {exc}",
            call_id=message.call_id,
        ) from exc


def json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A plain, JSON-serialisable copy of a tool's input schema (it may hold read-only mappings)."""
    copied = _plain(schema)
    assert isinstance(copied, dict)
    return copied


def tool_entry(spec: ToolSpec, names: ToolNames, schema_field: str) -> dict[str, Any]:
    """A tool as a provider lists it: its wire name, its input schema under ``schema_field``,
    and its description if it has one."""
    entry: dict[str, Any] = {
        "name": names.to_wire(spec.name),
        schema_field: json_schema(spec.input_schema),
    }
    if spec.description:
        entry["description"] = spec.description
    return entry


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def resolve_api_key(api_key: str | None, api_key_env: str | None, *, provider: str) -> str:
    """The key passed in, else the one in ``api_key_env``; else a ``ConfigError`` naming both.

    The key is declared secret: a provider that echoes it in an error body, or a URL that
    carries it, never puts it in the journal, ``show`` or a log line.
    """
    if api_key is not None:
        if not api_key:
            raise ConfigError(f"{provider}: api_key is empty")
        declare_secret(api_key)
        return api_key
    if api_key_env:
        found = os.environ.get(api_key_env)
        if found:
            declare_secret(found)
            return found
    where = f"set {api_key_env} or pass api_key=" if api_key_env else "pass api_key="
    raise ConfigError(f"{provider} needs an API key: {where}")


def check_options(
    provider: str,
    *,
    model: object,
    timeout: object,
    total_timeout: object,
    max_tokens: object,
    temperature: object,
    max_tokens_required: bool = False,
) -> None:
    """Refuse options a provider would reject only at the first request, with a ``ConfigError``."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{provider}: model must be a non-empty model name")
    if not _positive(timeout):
        raise ConfigError(f"{provider}: timeout must be positive seconds")
    if total_timeout is not None and not _positive(total_timeout):
        raise ConfigError(f"{provider}: total_timeout must be positive seconds or None")
    if max_tokens is None:
        if max_tokens_required:
            raise ConfigError(f"{provider}: max_tokens is required")
    elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"{provider}: max_tokens must be a positive integer")
    if temperature is not None and not (
        isinstance(temperature, int | float)
        and not isinstance(temperature, bool)
        and 0 <= temperature < float("inf")
    ):
        raise ConfigError(f"{provider}: temperature must be a non-negative number or None")


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
    )
