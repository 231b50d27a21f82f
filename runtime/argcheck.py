"""A tool's arguments accepted without jsonschema when its input schema is flat: an object of
named scalar properties, as ``@tool`` makes for a function of plain parameters.

jsonschema walks a schema in Python on every call (~20 us for one integer argument), a large
part of a step's own cost. ``flat_check`` reads such a schema once and returns a check that says
*valid* only where jsonschema (Draft 2020-12) would, and *don't know* otherwise; the caller then
asks jsonschema, which also words the error. Any keyword it does not list makes it return None,
and so does anything the meta-schema would refuse: a schema it reads is valid JSON Schema, and a
caller whose arguments it accepts need neither import jsonschema nor check the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["flat_check"]

_TOP = frozenset({"type", "properties", "required", "additionalProperties", "title", "description"})
_PROPERTY = frozenset({"type", "title", "description", "default"})  # the last three annotate

_ANY: Callable[[Any], bool] = lambda value: True  # noqa: E731 - a property without a type
_TYPES: dict[str, Callable[[Any], bool]] = {
    # Exact types only: a bool is not an integer, and a float holding an integer (which the
    # schema would accept) is left to jsonschema.
    "string": lambda value: type(value) is str,
    "integer": lambda value: type(value) is int,
    "number": lambda value: type(value) is int or type(value) is float,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
}


def flat_check(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """A check of arguments against ``schema`` that is True only if they are valid, or None if
    the schema is not one it reads (a ``$ref``, an array, a bound, an enum...)."""
    if not isinstance(schema, Mapping) or not _TOP.issuperset(schema):
        return None
    if schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if closed is not True and closed is not False:
        return None
    if not all(isinstance(k, str) for k in required) or len(set(required)) != len(required):
        return None
    if not _annotations_valid(schema):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, prop in properties.items():
        if not isinstance(name, str) or not isinstance(prop, Mapping):
            return None
        if not _PROPERTY.issuperset(prop) or not _annotations_valid(prop):
            return None
        kind = prop.get("type")
        if kind is None:
            checks[name] = _ANY
        elif isinstance(kind, str) and kind in _TYPES:
            checks[name] = _TYPES[kind]
        else:
            return None
    needed = tuple(required)
    open_ = closed is True

    def accepts(arguments: Mapping[str, Any]) -> bool:
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if not open_:
                    return False
            elif not check(value):
                return False
        return True

    return accepts


def _annotations_valid(schema: Mapping[str, Any]) -> bool:
    """Whether the annotations are what the meta-schema allows (a ``default`` may be anything):
    every schema this module reads is then valid JSON Schema, and nobody need check it."""
    return all(isinstance(schema.get(k, ""), str) for k in ("title", "description"))
