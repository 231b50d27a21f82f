"""The flat argument check says *valid* only where jsonschema does, and reads only flat schemas."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from runtime.argcheck import flat_check

FLAT = {
    "type": "object",
    "properties": {
        "i": {"type": "integer", "title": "I"},
        "x": {"type": "number"},
        "s": {"type": "string", "description": "text"},
        "b": {"type": "boolean", "default": False},
        "n": {"type": "null"},
        "any": {"title": "Anything"},
    },
    "required": ["i", "s"],
    "additionalProperties": False,
}
OPEN = {**FLAT, "additionalProperties": True}

VALUES: list[Any] = [
    {"i": 1, "s": "a"},
    {"i": 1, "s": "a", "x": 2.5, "b": True, "n": None, "any": [1, {"k": 2}]},
    {"i": 1, "s": "a", "x": 3},
    {"i": True, "s": "a"},
    {"i": 1.0, "s": "a"},
    {"i": 1.5, "s": "a"},
    {"i": "1", "s": "a"},
    {"i": 1},
    {"s": "a"},
    {},
    {"i": 1, "s": "a", "extra": 1},
    {"i": 1, "s": "a", "b": 0},
    {"i": 1, "s": "a", "x": False},
    {"i": 1, "s": "a", "n": 0},
    {"i": 2**70, "s": "a"},
]


@pytest.mark.parametrize("schema", [FLAT, OPEN], ids=["closed", "open"])
@pytest.mark.parametrize("value", VALUES, ids=[str(i) for i in range(len(VALUES))])
def test_valid_only_where_jsonschema_says_so(schema: dict[str, Any], value: Any) -> None:
    """Whenever the check accepts, jsonschema accepts; for these values it refuses only what
    jsonschema refuses, but for a float holding an integer (left to jsonschema)."""
    check = flat_check(schema)
    assert check is not None
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    if check(value):
        assert valid
    else:
        assert valid == (type(value.get("i")) is float and value["i"] == 1.0)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
        {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}},
        {"type": "object", "properties": {"a": {"type": "array"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {}},
        {"type": "object", "properties": {"a": {"enum": [1]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"type": "array"},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "object", "required": "a"},
        # What the meta-schema refuses: jsonschema, not the flat check, says so.
        {"type": "object", "additionalProperties": 1},
        {"type": "object", "required": ["a", "a"]},
        {"type": "object", "title": 5},
        {"type": "object", "properties": {"a": {"type": "string", "description": None}}},
    ],
)
def test_other_schemas_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert flat_check(schema) is None


@pytest.mark.parametrize("schema", [FLAT, OPEN, {}, {"type": "object"}], ids=str)
def test_a_schema_the_check_reads_is_valid_json_schema(schema: dict[str, Any]) -> None:
    """So the agent need not check it before accepting arguments by it."""
    assert flat_check(schema) is not None
    jsonschema.Draft202012Validator.check_schema(schema)
