"""Safety of MCP tools: untrusted hints change nothing; trusted hints and the host's word do."""

from __future__ import annotations

from typing import Any

import mcp.types as types
import pytest

from adapters.mcp import connect, tools
from runtime import Safety, ToolError
from tests.adapters.mcp.kit import OBJECT, Scripted, text

HINTS: dict[str, types.ToolAnnotations | None] = {
    "none": None,
    "empty": types.ToolAnnotations(),
    "read_only": types.ToolAnnotations(read_only_hint=True),
    "read_only_and_idempotent": types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    "idempotent": types.ToolAnnotations(idempotent_hint=True),
    "idempotent_not_destructive": types.ToolAnnotations(
        idempotent_hint=True, destructive_hint=False
    ),
    "idempotent_but_destructive": types.ToolAnnotations(
        idempotent_hint=True, destructive_hint=True
    ),
    "destructive": types.ToolAnnotations(destructive_hint=True),
    "not_read_only": types.ToolAnnotations(read_only_hint=False, idempotent_hint=False),
}


def hinted() -> Scripted:
    return Scripted(
        *(types.Tool(name=name, input_schema=OBJECT, annotations=a) for name, a in HINTS.items())
    )


async def safeties(**options: Any) -> dict[str, Safety]:
    async with connect(hinted().server) as session:
        return {t.spec.name: t.spec.safety for t in await tools(session, **options)}


async def test_every_tool_is_a_side_effect_unless_annotations_are_trusted() -> None:
    assert set((await safeties()).values()) == {Safety.SIDE_EFFECT}


async def test_trusted_annotations_map_onto_safety() -> None:
    assert await safeties(trust_annotations=True) == {
        "none": Safety.SIDE_EFFECT,
        "empty": Safety.SIDE_EFFECT,
        "read_only": Safety.READ_ONLY,
        "read_only_and_idempotent": Safety.READ_ONLY,  # read-only wins
        "idempotent": Safety.IDEMPOTENT,
        "idempotent_not_destructive": Safety.IDEMPOTENT,
        "idempotent_but_destructive": Safety.IDEMPOTENT,
        "destructive": Safety.SIDE_EFFECT,
        "not_read_only": Safety.SIDE_EFFECT,
    }


async def test_a_trusted_idempotent_hint_means_idempotent_even_when_destructive() -> None:
    """Deleting a file twice is one deletion: destructiveHint does not make a retry unsafe."""
    found = await safeties(trust_annotations=True)
    assert found["idempotent_but_destructive"] is Safety.IDEMPOTENT
    assert (await safeties())["idempotent_but_destructive"] is Safety.SIDE_EFFECT


@pytest.mark.parametrize("trusted", [False, True])
async def test_the_hosts_safety_wins_over_annotations_trusted_or_not(trusted: bool) -> None:
    chosen = {"read_only": Safety.SIDE_EFFECT, "destructive": Safety.IDEMPOTENT}
    found = await safeties(trust_annotations=trusted, safety=chosen)
    assert found["read_only"] is Safety.SIDE_EFFECT
    assert found["destructive"] is Safety.IDEMPOTENT


@pytest.mark.parametrize("value", ["read_only", 1, None])
async def test_a_safety_that_is_not_a_safety_is_a_config_error(value: Any) -> None:
    from runtime import ConfigError

    with pytest.raises(ConfigError, match="must be a Safety"):
        await safeties(safety={"read_only": value})


async def test_an_untrusted_read_only_label_never_caches_or_retries() -> None:
    answers = iter(["first", "second"])
    scripted = Scripted(
        types.Tool(
            name="lookup",
            input_schema=OBJECT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        answer=lambda p: types.CallToolResult(content=[text(next(answers, "again"))]),
    )
    async with connect(scripted.server) as session:
        (lookup,) = await tools(session)
        assert lookup.spec.safety is Safety.SIDE_EFFECT
        assert await lookup.call({}) == [{"type": "text", "text": "first"}]
        assert await lookup.call({}) == [{"type": "text", "text": "second"}]
        scripted.answer = lambda p: types.CallToolResult(content=[text("no")], is_error=True)
        with pytest.raises(ToolError):
            await lookup.call({})
    assert len(scripted.calls) == 3
