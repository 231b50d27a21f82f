"""Usage limits (``runtime.limits``): counted from the journal, so a resume continues the count;
going over ends the run failed, naming the limit; a call already attempted is never abandoned.
On SQLite and PostgreSQL (``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic
import pytest

from runtime import Agent, AssistantTurn, Journal, RunStatus, ToolSpec, UsageLimits, tool
from runtime.errors import ConfigError
from runtime.journal import Resolution
from runtime.messages import Message
from runtime.output import OutputSpec
from runtime.testing import ScriptedModel
from tests.helpers import call


def _turns(n: int, usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``n`` turns that each call ``note``, then an answer."""
    turn: dict[str, Any] = {"usage": usage} if usage else {}
    return [
        *({**turn, "tool_calls": [call(f"c{i}", "note", text=str(i))]} for i in range(n)),
        {**turn, "text": "done"},
    ]


class Notes:
    def __init__(self) -> None:
        self.written: list[str] = []

        @tool
        async def note(text: str) -> str:
            """Write a note (a side effect)."""
            self.written.append(text)
            return "ok"

        self.tool = note


async def test_a_run_over_its_request_limit_fails_naming_it(journal: Journal) -> None:
    notes, model = Notes(), ScriptedModel(_turns(5))
    agent = Agent(model=model, tools=[notes.tool], usage_limits=UsageLimits(requests=2))
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.FAILED
    assert model.calls == 2 and notes.written == ["0", "1"]
    assert result.error == (
        "usage limit requests=2 reached: 2 model requests made, the next would exceed it"
    )


async def test_tokens_over_the_limit_stop_the_turns_calls_before_they_run(
    journal: Journal,
) -> None:
    notes = Notes()
    model = ScriptedModel(_turns(5, {"input_tokens": 60, "output_tokens": 5}))
    limits = UsageLimits(input_tokens=100)
    result = await Agent(model=model, tools=[notes.tool], usage_limits=limits).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.FAILED
    assert notes.written == ["0"]  # turn 2 brought the count to 120: its call never ran
    assert result.error == "usage limit input_tokens=100 exceeded: 120 used"
    assert result.usage.input_tokens == 120


async def test_a_turn_asking_for_more_tool_calls_than_allowed_runs_none(
    journal: Journal,
) -> None:
    notes = Notes()
    model = ScriptedModel(
        [{"tool_calls": [call("a", "note", text="a"), call("b", "note", text="b")]}]
    )
    limits = UsageLimits(tool_calls=1)
    result = await Agent(model=model, tools=[notes.tool], usage_limits=limits).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.FAILED
    assert notes.written == []
    assert result.error is not None and "tool_calls=1 exceeded" in result.error


async def test_cost_is_limited_where_the_model_reports_it(journal: Journal) -> None:
    notes = Notes()
    model = ScriptedModel(_turns(5, {"input_tokens": 1, "output_tokens": 1, "cost": 0.25}))
    result = await Agent(model=model, tools=[notes.tool], usage_limits=UsageLimits(cost=0.6)).run(
        "r", "go", journal=journal
    )
    assert result.status is RunStatus.FAILED
    assert result.error == "usage limit cost=0.6 exceeded: 0.75 spent"
    assert result.usage.cost == 0.75


class Dies:
    """A model that answers from a script and dies (as its process would) at request ``at``."""

    def __init__(self, script: list[dict[str, Any]], at: int):
        self.model, self.at, self.requests = ScriptedModel(script), at, 0

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: OutputSpec | None = None,
    ) -> AssistantTurn:
        self.requests += 1
        if self.requests == self.at:
            raise SystemExit("killed")
        return await self.model.complete(system_prompt, messages, tools, output=output)


async def test_a_limit_hit_after_a_resume_counts_the_earlier_usage(journal: Journal) -> None:
    notes = Notes()
    usage = {"input_tokens": 40, "output_tokens": 1}
    limits = UsageLimits(input_tokens=100)
    dying = Agent(model=Dies(_turns(5, usage), at=3), tools=[notes.tool], usage_limits=limits)
    with pytest.raises(SystemExit):
        await dying.run("r", "go", journal=journal)
    assert notes.written == ["0", "1"]  # 80 tokens: under the limit
    model = ScriptedModel(_turns(5, usage))
    result = await Agent(model=model, tools=[notes.tool], usage_limits=limits).resume(
        "r", journal=journal
    )
    # One more request (120 tokens in all) and the run is over: the count did not restart.
    assert model.calls == 1
    assert result.status is RunStatus.FAILED
    assert result.error == "usage limit input_tokens=100 exceeded: 120 used"
    assert notes.written == ["0", "1"]


async def test_an_attempted_call_is_not_abandoned_by_a_limit(journal: Journal) -> None:
    @tool
    async def charge() -> str:
        """A side effect whose outcome is lost."""
        raise RuntimeError("connection reset")

    script: list[dict[str, Any]] = [
        {"tool_calls": [call("c1", "charge")], "usage": {"input_tokens": 500}},
        {"text": "done"},
    ]
    halted = await Agent(model=ScriptedModel(script), tools=[charge]).run(
        "r", "go", journal=journal
    )
    assert halted.status is RunStatus.HALTED
    # Resumed under a limit the run is already over: the attempted charge still halts.
    limited = Agent(
        model=ScriptedModel(script), tools=[charge], usage_limits=UsageLimits(input_tokens=100)
    )
    again = await limited.resume("r", journal=journal)
    assert again.status is RunStatus.HALTED
    # Once a person says what happened, the run ends over its limit.
    await journal.resolve("r", "c1", Resolution.succeeded({"charged": True}), by="ann")
    ended = await limited.resume("r", journal=journal)
    assert ended.status is RunStatus.FAILED
    assert ended.error == "usage limit input_tokens=100 exceeded: 500 used"


class Answer(pydantic.BaseModel):
    n: int


async def test_every_validation_retry_is_a_request(journal: Journal) -> None:
    bad: dict[str, Any] = {"output": {"n": "x"}}
    model = ScriptedModel([bad, bad, bad, {"output": {"n": 1}}])
    agent = Agent(
        model=model, output_type=Answer, output_retries=5, usage_limits=UsageLimits(requests=3)
    )
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.FAILED
    assert model.calls == 3
    assert result.error is not None and "requests=3 reached" in result.error


@pytest.mark.parametrize(
    "options", [{"requests": -1}, {"tool_calls": 1.5}, {"cost": float("nan")}, {"requests": True}]
)
def test_limits_are_checked_when_built(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="UsageLimits"):
        UsageLimits(**options)
    with pytest.raises(ConfigError, match="usage_limits must be"):
        Agent(model=ScriptedModel([]), usage_limits=options)  # type: ignore[call-overload]
