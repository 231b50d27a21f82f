"""Seeded fuzzing of everything that reaches the journal from outside: a model's tool calls, tool
results, answers and resolutions. Each input is journaled and read back identically, or refused
with an error naming what was wrong; the writer stays alive and the other runs finish."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from typing import Any

import pytest

from runtime import (
    Agent,
    ConfigError,
    Journal,
    ProtocolError,
    Resolution,
    RunStatus,
    Safety,
    ToolContext,
    ToolSpec,
)
from runtime.jsontext import MAX_DEPTH
from runtime.testing import ScriptedModel
from tests.helpers import call

SEEDS = range(3)
CASES = 40

# Printable and hostile code points: controls, NUL, bidi overrides, lone surrogates, astral.
POOL = (
    [chr(c) for c in range(0x20, 0x7F)]
    + [chr(c) for c in range(0x00, 0x20)]
    + ["\u202e", "\u2066", "\u200f", "\u061c", "\ufeff", "\u00e9", "\u4e2d", "\U0001f600"]
    + ["\ud800", "\udfff", "\udcff"]
)


def text(rng: random.Random) -> str:
    n = rng.choice([0, 1, 5, 40, 2_000]) if rng.random() < 0.98 else 200_000
    return "".join(rng.choice(POOL) for _ in range(n))


def value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 and rng.random() < 0.02:
        return deep(rng.choice([MAX_DEPTH - 10, MAX_DEPTH + 30]))
    if depth > 4 or roll < 0.35:
        return rng.choice(
            [
                text(rng),
                rng.randint(-(2**70), 2**70),
                rng.choice([0.5, -0.0, 1e308, float("nan"), float("inf")]),
                True,
                None,
            ]
        )
    if roll < 0.65:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(rng)[:12]: value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def deep(levels: int) -> Any:
    out: Any = "bottom"
    for _ in range(levels):
        out = [out]
    return out


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Echo:
    """A tool taking any object and returning the result it was built with."""

    def __init__(self, name: str, safety: Safety, result: Any):
        self.spec = ToolSpec(name=name, safety=safety, input_schema={"type": "object"})
        self.result = result

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        return self.result


class Lost:
    """A side effect whose outcome is never learnt (the run halts on it)."""

    spec = ToolSpec(name="lost", input_schema={"type": "object"})

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        raise ConnectionError("the line went dead")


async def one_case(journal: Journal, rng: random.Random, run_id: str) -> str:
    arguments, result = {"v": value(rng)}, value(rng)
    safety = rng.choice(list(Safety))
    script = [{"tool_calls": [call("c1", "echo", **arguments)]}, {"text": "done"}]
    agent = Agent(model=ScriptedModel(script), tools=[Echo("echo", safety, result)])
    try:
        outcome = await agent.run(run_id, "go", journal=journal)
    except ProtocolError as exc:
        assert "cannot be journaled" in str(exc) and "turn." in str(exc)
        assert (await journal.require(run_id)).turns == []
        return "turn refused"
    assert outcome.status is RunStatus.COMPLETED, outcome
    state = await journal.require(run_id)
    assert same(state.turns[0].tool_calls[0].arguments, arguments)
    recorded = state.calls["c1"].result
    assert recorded is not None
    if recorded.payload["outcome"] == "value":
        assert same(recorded.payload["value"], result)
        return "journaled"
    assert recorded.payload["error"]["type"] == "unrecordable_result"
    assert "ran, but its result cannot be journaled: result" in recorded.payload["error"]["message"]
    return "result unrecordable"


async def resolve_case(journal: Journal, rng: random.Random, run_id: str) -> str:
    script = [{"tool_calls": [call("c1", "lost")]}, {"text": "done"}]
    halted = await Agent(model=ScriptedModel(script), tools=[Lost()]).run(
        run_id, "go", journal=journal
    )
    assert halted.status is RunStatus.HALTED
    given = value(rng)
    try:
        await journal.resolve(run_id, "c1", Resolution.succeeded(given), evidence=text(rng)[:50])
    except ConfigError as exc:
        assert "cannot journal this resolution: resolution." in str(exc)
        return "resolution refused"
    state = await journal.require(run_id)
    assert state.calls["c1"].result is not None
    assert same(state.calls["c1"].result.payload["value"], given)
    return "resolution journaled"


async def answer_case(journal: Journal, rng: random.Random, run_id: str) -> str:
    class Ask:
        spec = ToolSpec(name="ask", safety=Safety.READ_ONLY)

        async def call(self, arguments: Any, context: ToolContext | None = None) -> Any:
            assert context is not None
            return await context.interrupt("q", "anything?", schema={})

    script = [{"tool_calls": [call("c1", "ask")]}, {"text": "done"}]
    waiting = await Agent(model=ScriptedModel(script), tools=[Ask()]).run(
        run_id, "go", journal=journal
    )
    assert waiting.status is RunStatus.WAITING
    given = value(rng)
    try:
        await journal.answer(run_id, "q", given)
    except ConfigError as exc:
        assert "cannot journal this answer: answer.value" in str(exc)
        return "answer refused"
    state = await journal.require(run_id)
    assert same(state.calls["c1"].answers["q"].payload["value"], given)
    return "answer journaled"


@pytest.mark.parametrize("seed", SEEDS)
async def test_hostile_values_are_journaled_identically_or_refused_clearly(
    journal: Journal, seed: int
) -> None:
    rng = random.Random(seed)
    canary = Agent(
        model=ScriptedModel([{"tool_calls": [call("c1", "ok")]}, {"text": "fine"}]),
        tools=[Echo("ok", Safety.SIDE_EFFECT, {"ok": True})],
    )
    cases = []
    for i in range(CASES):
        kind = rng.choice([one_case, one_case, resolve_case, answer_case])
        cases.append(kind(journal, random.Random(rng.random()), f"f{seed}-{i}"))
    canaries = [canary.run(f"canary{seed}-{i}", "go", journal=journal) for i in range(20)]
    outcomes = await asyncio.wait_for(asyncio.gather(*cases, *canaries), 120)
    seen = set(outcomes[:CASES])
    assert all(r.status is RunStatus.COMPLETED for r in outcomes[CASES:])
    # The generator reaches both sides of the boundary (the seeds are fixed, so this holds).
    assert {"journaled", "turn refused"} <= seen, seen
