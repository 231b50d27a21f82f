"""The idempotency key as a tool argument: bide's key, written where the server reads it.

A server that takes its idempotency key as a tool argument describes it to the model, and a
model that retries a call mints a fresh key: the server sees two requests and acts twice. When
the host names that argument (``tools(..., idempotency_argument={"charge": "key"})``), bide
writes the call's own key into it, the same on every attempt and every resume, whatever the
model put there. Nothing is guessed from argument names: only a named argument is filled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from runtime.errors import ConfigError
from runtime.tools import ToolSpec, safe_repr

__all__ = [
    "KEY_ARGUMENT_STEP",
    "key_argument_map",
    "model_facing_schema",
    "with_key",
]

KEY_ARGUMENT_STEP: Final = "mcp_key_argument"
"""The name of the journaled step (a side effect's in-flight handle) saying which argument
carried bide's key, what was sent in it and what the model had put there."""

_NOTE: Final = (
    "Set by the host to its own idempotency key for this call; leave it out (any value given "
    "is replaced)."
)


def key_argument_map(option: Mapping[str, str] | None) -> dict[str, str]:
    """Check ``tools``' ``idempotency_argument``: a tool's name to one argument's name."""
    if not isinstance(option, Mapping | None):
        raise ConfigError("idempotency_argument maps a tool's name to the name of one argument")
    found: dict[str, str] = {}
    for tool, argument in (option or {}).items():
        if not isinstance(argument, str) or not argument:
            raise ConfigError(
                f"idempotency_argument[{safe_repr(tool)}] must name one argument of the tool, "
                f"not {safe_repr(argument)}"
            )
        found[tool] = argument
    return found


def model_facing_schema(spec: ToolSpec, argument: str, server: str) -> dict[str, Any]:
    """The input schema the model sees: the key argument no longer required, and described as
    the host's. The server's own schema still checks what is sent, key included."""
    schema = copy.deepcopy(dict(spec.input_schema))
    properties = schema.get("properties")
    prop = properties.get(argument) if isinstance(properties, Mapping) else None
    if not isinstance(prop, Mapping):
        raise ConfigError(
            f"idempotency_argument names {safe_repr(argument)} for {spec.name}, but MCP server "
            f"{server!r} lists no such argument in its input schema"
        )
    kind = prop.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds is not None and "string" not in kinds:
        raise ConfigError(
            f"idempotency_argument names {safe_repr(argument)} for {spec.name}, but its schema "
            f"type is {safe_repr(kind)}: bide's key is a string"
        )
    assert isinstance(properties, dict)
    described = dict(prop)
    said = described.get("description")
    described["description"] = f"{said} ({_NOTE})" if isinstance(said, str) and said else _NOTE
    properties[argument] = described
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [name for name in required if name != argument]
    return schema


def with_key(
    arguments: Mapping[str, Any], argument: str, key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments to send, with ``key`` in ``argument``, and the step that records both."""
    sent = {**arguments, argument: key}
    step: dict[str, Any] = {"argument": argument, "sent": key}
    if argument in arguments:
        step["model_gave"] = arguments[argument]
    return sent, {KEY_ARGUMENT_STEP: step}
