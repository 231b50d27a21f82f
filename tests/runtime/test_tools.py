"""@tool, ToolSpec and tool names."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from runtime import (
    Agent,
    ConfigError,
    Journal,
    Safety,
    ToolArgumentsError,
    ToolContext,
    ToolSpec,
    tool,
)
from runtime.testing import MemoryStore, ScriptedModel
from runtime.tools import idempotency_key_for, safe_repr, validate_tool_name


class Receipt(pydantic.BaseModel):
    id: str
    amount: int


def test_tool_takes_its_schema_from_the_signature_and_its_description_from_the_docstring() -> None:
    @tool
    async def charge(customer: str, amount: int, currency: str = "EUR") -> Receipt:
        """Charge a customer."""
        return Receipt(id="x", amount=amount)

    spec = charge.spec
    assert spec.name == "charge" and spec.description == "Charge a customer."
    assert spec.safety is Safety.SIDE_EFFECT and spec.timeout is None and spec.approval is None
    assert spec.input_schema["required"] == ["customer", "amount"]
    assert spec.input_schema["properties"]["amount"]["type"] == "integer"
    assert spec.input_schema["additionalProperties"] is False
    assert spec.output_schema is not None and spec.output_schema["type"] == "object"


def test_tool_with_options_sets_name_safety_and_timeout() -> None:
    @tool(name="kv.get", safety=Safety.READ_ONLY, timeout=2.5)
    async def get(key: str) -> str:
        return key

    assert (get.spec.name, get.spec.safety, get.spec.timeout) == ("kv.get", Safety.READ_ONLY, 2.5)


async def test_the_context_parameter_is_filled_and_kept_out_of_the_schema() -> None:
    seen: list[ToolContext | None] = []

    @tool
    async def t(x: int, ctx: ToolContext | None = None) -> int:
        seen.append(ctx)
        return x

    assert set(t.spec.input_schema["properties"]) == {"x"}
    context = ToolContext(run_id="r", call_id="c", tool_name="t")
    assert await t.call({"x": 1}, context) == 1
    assert seen[0] is context
    assert context.idempotency_key.startswith("bide-")


async def test_a_tool_returns_json_values_for_models_and_dates() -> None:
    import datetime

    @tool
    async def t() -> dict[str, Any]:
        return {"r": Receipt(id="a", amount=1), "d": datetime.date(2026, 1, 2)}

    assert await t.call({}) == {"r": {"id": "a", "amount": 1}, "d": "2026-01-02"}


async def test_calling_a_function_tool_with_bad_arguments_raises_tool_arguments_error() -> None:
    @tool
    async def t(x: int) -> int:
        return x

    with pytest.raises(ToolArgumentsError, match="x"):
        await t.call({"x": "not a number"})


@pytest.mark.parametrize("name", ["", "a b", "x" * 129, "naïve", "semi;colon", "new\nline"])
def test_tool_names_outside_the_mcp_grammar_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid tool name"):
        validate_tool_name(name)


@pytest.mark.parametrize("name", ["a", "A-Z_0.9", "x" * 128])
def test_tool_names_inside_the_mcp_grammar_are_accepted(name: str) -> None:
    assert validate_tool_name(name) == name


def test_safe_repr_escapes_control_and_bidi_characters_and_bounds_length() -> None:
    text = safe_repr("evil\n\x1b[31m\u202ename" + "x" * 200)
    assert "\n" not in text and "\x1b" not in text and "\u202e" not in text
    assert text.isascii() and len(text) < 120


def test_tool_needs_an_async_function() -> None:
    def sync(x: int) -> int:
        return x

    with pytest.raises(ConfigError, match="async"):
        tool(sync)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw", [{"name": "no spaces"}, {"timeout": 0}, {"safety": "read_only"}, {"settle": -1}]
)
def test_tool_checks_everything_but_its_schemas_when_made(kw: dict[str, Any]) -> None:
    async def act(x: int) -> None:
        """Act."""

    with pytest.raises(ConfigError):
        tool(**kw)(act)


class HandWritten:
    """A Tool whose schema someone wrote by hand (as an MCP server does)."""

    def __init__(self, schema: dict[str, Any]):
        self.spec = ToolSpec(name="hand", input_schema=schema)

    async def call(self, arguments: Any, context: ToolContext | None = None) -> Any:
        return None


def test_an_agent_refuses_a_hand_written_schema_that_is_not_json_schema_when_built() -> None:
    broken = {"type": "object", "properties": {"x": {"type": 5}}}
    with pytest.raises(ConfigError, match="hand: invalid input schema"):
        Agent(model=ScriptedModel([]), tools=[HandWritten(broken)])


class Opaque:
    """A parameter type pydantic has no schema for."""


async def test_a_tool_without_a_schema_fails_a_new_run_before_it_is_journaled() -> None:
    """A @tool's schemas are built when first needed (a replay never needs them); a new run
    needs them for its start record, so it fails before anything is written."""

    @tool
    async def act(x: Opaque) -> None:
        """Act."""

    agent = Agent(model=ScriptedModel([{"text": "done"}]), tools=[act])
    async with Journal(store=MemoryStore()) as journal:
        with pytest.raises(ConfigError, match="act: its arguments have no JSON schema"):
            await agent.run("r1", "go", journal=journal)
        assert await journal.state("r1") is None


@pytest.mark.parametrize(
    "kw",
    [
        {"input_schema": {"type": "array"}},
        {"output_schema": {"type": "string"}},
        {"timeout": 0},
        {"timeout": -1},
        {"safety": "read_only"},
    ],
)
def test_tool_spec_is_validated_when_built(kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ToolSpec(name="t", **kw)


def test_tool_spec_is_frozen() -> None:
    spec = ToolSpec(name="t")
    with pytest.raises(AttributeError):
        spec.name = "u"  # type: ignore[misc]


def test_idempotency_keys_of_distinct_calls_never_collide() -> None:
    assert idempotency_key_for("a\0c", "1") != idempotency_key_for("a", "c\x001")
    assert idempotency_key_for("a\0c", "1", scheme=1) == idempotency_key_for(
        "a", "c\x001", scheme=1
    )
    assert idempotency_key_for("r", "c1") == idempotency_key_for("r", "c1")
    assert idempotency_key_for("r", "c1").startswith("bide-")


async def test_a_run_started_by_bide_0_1_keeps_the_keys_its_provider_saw(journal: Journal) -> None:
    seen: list[str] = []

    @tool(safety=Safety.IDEMPOTENT)
    async def upsert(context: ToolContext) -> str:
        """Record the key it was given."""
        seen.append(context.idempotency_key)
        return "ok"

    def agent() -> Agent:
        script = [{"tool_calls": [{"id": "c1", "name": "upsert", "arguments": {}}]}, {"text": "."}]
        return Agent(model=ScriptedModel(script), tools=[upsert])

    # A start record as bide 0.1 wrote it: no key scheme.
    await journal.store.create_run("old")
    await journal.store.append("old", "start", "start", {"input": "go", "agent": "agent"})
    await agent().resume("old", journal=journal)
    await agent().run("new", "go", journal=journal)
    assert seen == [
        idempotency_key_for("old", "c1", scheme=1),
        idempotency_key_for("new", "c1", scheme=2),
    ]
    assert (await journal.require("new")).start["key_scheme"] == 2  # type: ignore[index]
