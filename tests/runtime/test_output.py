"""Typed output (``Agent(output_type=...)``): validated, retried as journaled turns, kept in the
end record, returned by a resume without asking the model, and given by an output tool at most
once. On SQLite and PostgreSQL (``tests/conftest.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict

from runtime import Agent, AssistantTurn, Journal, RunStatus, Safety, ToolSpec, tool
from runtime import records as R
from runtime.errors import ConfigError
from runtime.messages import Message, ToolCall, ToolResultMessage, UserMessage
from runtime.output import OUTPUT_TOOL, OutputSpec
from runtime.testing import ScriptedModel


class Invoice(pydantic.BaseModel):
    customer: str
    cents: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


class Refund(pydantic.BaseModel):
    refund: int


async def _end(journal: Journal, run_id: str) -> dict[str, Any]:
    record = await journal.store.get(run_id, R.END)
    assert record is not None
    payload: dict[str, Any] = record.payload
    return payload


async def test_a_pydantic_answer_is_validated_kept_and_returned_by_resume(
    journal: Journal,
) -> None:
    model = ScriptedModel([{"output": {"customer": "ann", "cents": 500}}])
    agent = Agent(model=model, output_type=Invoice)
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert result.output == Invoice(customer="ann", cents=500)
    assert result.to_json()["output"] == {"customer": "ann", "cents": 500}
    end = await _end(journal, "r")
    assert end["output"] == {"customer": "ann", "cents": 500}
    # Driven again, by a fresh agent whose model would answer something else: no model call.
    other = ScriptedModel([{"output": {"customer": "bob", "cents": 1}}])
    again = await Agent(model=other, output_type=Invoice).run("r", "bill ann", journal=journal)
    assert again.output == Invoice(customer="ann", cents=500)
    assert other.calls == 0


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Person, {"name": "ann", "age": 40}, {"name": "ann", "age": 40}),
        (int, 42, 42),
        (list[int], [1, 2], [1, 2]),
        (Invoice | Refund, {"refund": 7}, Refund(refund=7)),
    ],
)
async def test_dataclasses_typeddicts_plain_types_and_unions(
    journal: Journal, output_type: Any, answer: Any, expected: Any
) -> None:
    model = ScriptedModel([{"output": answer}])
    agent: Agent[Any] = Agent(model=model, output_type=output_type)
    result = await agent.run("r", "go", journal=journal)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == expected
    resumed = await Agent(model=ScriptedModel([]), output_type=output_type).resume(
        "r", journal=journal
    )
    assert resumed.output == expected


class Seen:
    """A model that records what it was shown and offered, and answers from a script."""

    def __init__(self, turns: Sequence[AssistantTurn]):
        self.turns = list(turns)
        self.shown: list[list[Message]] = []
        self.offered: list[list[str]] = []

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        self.shown.append(list(messages))
        self.offered.append([t.name for t in tools])
        return self.turns[len(self.shown) - 1]


async def test_an_invalid_answer_is_retried_as_a_journaled_turn(journal: Journal) -> None:
    # A model that knows nothing of typed output is offered the output tool among its tools.
    model = Seen(
        [
            AssistantTurn(tool_calls=(ToolCall("a", OUTPUT_TOOL, {"customer": "ann"}),)),
            AssistantTurn(
                tool_calls=(ToolCall("b", OUTPUT_TOOL, {"customer": "ann", "cents": 5}),)
            ),
        ]
    )
    agent = Agent(model=model, output_type=Invoice)
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Invoice(customer="ann", cents=5)
    assert result.turns == 2
    assert model.offered == [[OUTPUT_TOOL], [OUTPUT_TOOL]]
    told = model.shown[1][-1]
    assert isinstance(told, ToolResultMessage) and told.is_error
    assert "cents" in told.content["message"] and "Field required" in told.content["message"]
    first = await journal.store.get("r", R.result_key("a", 1))
    assert first is not None and first.payload["error"]["type"] == "invalid_output"


async def test_past_output_retries_the_run_fails_with_the_validation_error(
    journal: Journal,
) -> None:
    bad = {"customer": "ann", "cents": "lots"}
    model = ScriptedModel([{"output": bad}, {"output": bad}, {"output": bad}])
    agent = Agent(model=model, output_type=Invoice, output_retries=1)
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.FAILED
    assert model.calls == 2  # the answer, and one retry
    assert result.error is not None
    assert "failed validation 2 times (output_retries=1)" in result.error
    assert "cents: Input should be a valid integer" in result.error
    assert (await _end(journal, "r"))["error"] == result.error


class Crashing:
    """A model that answers from a script, and dies (as its process would) at request ``at``."""

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


async def test_a_crash_mid_retry_resumes_the_count(journal: Journal) -> None:
    bad = {"customer": "ann"}
    crashing = Crashing([{"output": bad}, {"output": bad}], at=2)
    with pytest.raises(SystemExit):
        await Agent(model=crashing, output_type=Invoice, output_retries=1).run(
            "r", "bill ann", journal=journal
        )
    assert await journal.store.get("r", R.result_key("output-1", 1)) is not None
    # The new process's model answers badly again: its one retry was used before the crash.
    model = ScriptedModel([{"output": bad}, {"output": bad}, {"output": bad}])
    result = await Agent(model=model, output_type=Invoice, output_retries=1).resume(
        "r", journal=journal
    )
    assert result.status is RunStatus.FAILED
    assert model.calls == 1
    assert result.error is not None and "failed validation 2 times" in result.error


async def test_a_json_text_answer_is_validated_and_a_bad_one_asked_again(
    journal: Journal,
) -> None:
    model = ScriptedModel(
        [{"text": "the invoice is for ann"}, {"text": '{"customer": "ann", "cents": 9}'}]
    )
    seen: list[list[Message]] = []
    inner = model.complete

    async def complete(*args: Any, **kwargs: Any) -> AssistantTurn:
        seen.append(list(args[1]))
        return await inner(*args, **kwargs)

    model.complete = complete  # type: ignore[method-assign]
    result = await Agent(model=model, output_type=Invoice).run("r", "bill", journal=journal)
    assert result.output == Invoice(customer="ann", cents=9)
    # The model sees its own text, then a user message that says what was wrong.
    second = seen[1]
    assert isinstance(second[1], AssistantTurn) and second[1].tool_calls == ()
    assert second[1].text == "the invoice is for ann"
    assert isinstance(second[2], UserMessage) and "not valid" in second[2].text


async def test_an_output_tool_ends_the_run_and_runs_at_most_once(journal: Journal) -> None:
    ran: list[int] = []

    @tool(safety=Safety.IDEMPOTENT)
    async def quote(cents: int) -> dict[str, Any]:
        """Make a quote."""
        ran.append(cents)
        return {"customer": "ann", "cents": cents}

    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "q1", "name": "quote", "arguments": {"cents": 3}},
                    {"id": "q2", "name": "quote", "arguments": {"cents": 4}},
                ]
            },
            {"text": "never asked"},
        ]
    )
    agent = Agent(model=model, tools=[quote], output_type=Invoice, output_tools=["quote"])
    result = await agent.run("r", "quote ann", journal=journal)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Invoice(customer="ann", cents=3)
    assert ran == [3]
    assert model.calls == 1
    refused = await journal.store.get("r", R.result_key("q2", 1))
    assert refused is not None and refused.payload["error"]["type"] == "output_refused"


async def test_an_output_tool_whose_value_is_not_the_type_fails_the_run(
    journal: Journal,
) -> None:
    @tool(safety=Safety.READ_ONLY)
    async def quote() -> dict[str, Any]:
        """Make a quote."""
        return {"customer": "ann"}

    model = ScriptedModel([{"tool_calls": [{"id": "q1", "name": "quote"}]}])
    agent = Agent(model=model, tools=[quote], output_type=Invoice, output_tools=["quote"])
    result = await agent.run("r", "quote", journal=journal)
    assert result.status is RunStatus.FAILED
    assert result.error is not None and "output tool quote returned a value" in result.error


def test_output_settings_are_checked_when_the_agent_is_built() -> None:
    model = ScriptedModel([{"text": "x"}])
    with pytest.raises(ConfigError, match="output_retries"):
        Agent(model=model, output_type=Invoice, output_retries=-1)
    with pytest.raises(ConfigError, match="not a tool of the agent"):
        Agent(model=model, output_type=Invoice, output_tools=["nope"])
    with pytest.raises(ConfigError, match="no JSON schema"):
        Agent(model=model, output_type=object())

    @tool(name=OUTPUT_TOOL)
    async def clash() -> None:
        """Named like the output tool."""

    with pytest.raises(ConfigError, match="name of the output tool"):
        Agent(model=model, tools=[clash], output_type=Invoice)
    with pytest.raises(ConfigError, match="not both"):
        ScriptedModel([{"output": 1, "tool_calls": [{"id": "a", "name": "b"}]}])


async def test_scripted_output_without_an_output_type_is_refused(journal: Journal) -> None:
    agent = Agent(model=ScriptedModel([{"output": 1}]))
    with pytest.raises(ConfigError, match="no output_type"):
        await agent.run("r", "go", journal=journal)
