"""DurableAgent with real Pydantic AI agents (only the model scripted, by ``FunctionModel`` or
``TestModel``): what is journaled, what is replayed, and what is refused when it is built."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.output import ToolOutput
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.usage import UsageLimits

from adapters.pydantic_ai import DurableAgent, ToolPolicy, call_context
from runtime import BudgetError, ConfigError, Journal, RunStatus, Safety
from runtime.tools import idempotency_key_for


class Script:
    """A FunctionModel function from a list of responses, counting the requests it answers."""

    def __init__(self, *responses: ModelResponse):
        self.responses = responses
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(messages)
        self.infos.append(info)
        return self.responses[len(self.requests) - 1]


def call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])


def text(value: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(value)])


@pytest.fixture
async def journal(tmp_path: Path) -> Any:
    async with Journal(tmp_path / "bide.db") as j:
        yield j


async def test_a_recorded_turn_or_result_is_never_asked_for_again(journal: Journal) -> None:
    script = Script(call("lookup", {"customer": "ann"}, "c1"), text("ann is fine"))
    agent = Agent(
        FunctionModel(script),
        instructions="Be brief.",
        deps_type=int,
        model_settings={"temperature": 0.1},
    )
    seen: list[tuple[int, str | None]] = []

    @agent.tool
    async def lookup(ctx: RunContext[int], customer: str) -> dict[str, Any]:
        """Look a customer up."""
        seen.append((ctx.deps, ctx.tool_call_id))
        return {"customer": customer, "score": 7}

    durable = DurableAgent(agent, tools={"lookup": Safety.READ_ONLY}, deps=lambda: 3)
    first = await durable.run("r1", "How is ann?", journal=journal)
    assert (first.status, first.output) == (RunStatus.COMPLETED, "ann is fine")
    assert seen == [(3, "c1")]
    # The model saw Pydantic AI's own messages: the instructions, the tool and its return.
    assert script.infos[0].instructions == "Be brief."
    assert (script.infos[0].model_settings or {}).get("temperature") == 0.1
    assert [t.name for t in script.infos[0].function_tools] == ["lookup"]
    (returned,) = [p for p in script.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert (returned.tool_call_id, returned.content) == ("c1", {"customer": "ann", "score": 7})
    again = await durable.run("r1", "How is ann?", journal=journal)
    assert (again.status, again.output) == (RunStatus.COMPLETED, "ann is fine")
    assert len(script.requests) == 2 and len(seen) == 1
    state = await journal.require("r1")
    assert [t.text for t in state.turns] == [None, "ann is fine"]


async def test_test_model_calls_every_tool_through_bide(journal: Journal) -> None:
    agent = Agent(TestModel())
    asked: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        asked.append(city)
        return "sunny"

    durable = DurableAgent(agent, tools={"weather": Safety.READ_ONLY})
    result = await durable.run("t1", "Weather?", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert len(asked) == 1
    state = await journal.require("t1")
    (cs,) = state.calls.values()
    assert cs.call.name == "weather" and cs.plan["safety"] == "read_only"
    assert "sunny" in (result.output or "")


async def test_an_unnamed_tool_is_a_side_effect_and_gets_bides_key(journal: Journal) -> None:
    script = Script(call("send", {"to": "ann"}, "c1"), text("sent"))
    agent = Agent(FunctionModel(script))
    keys: list[str] = []

    @agent.tool_plain
    async def send(to: str) -> str:
        """Send a message."""
        keys.append(call_context().idempotency_key)
        return "ok"

    result = await DurableAgent(agent).run("s1", "Tell ann", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert keys == [idempotency_key_for("s1", "c1")]
    state = await journal.require("s1")
    assert state.calls["c1"].plan["safety"] == "side_effect"
    assert list(state.calls["c1"].markers) == [1]  # the attempt marker went first


async def test_an_idempotent_tool_is_retried_with_the_same_key(journal: Journal) -> None:
    script = Script(call("refund", {"order": "A-1"}, "c1"), text("refunded"))
    agent = Agent(FunctionModel(script))
    keys: list[str] = []

    @agent.tool_plain
    async def refund(order: str) -> str:
        """Refund an order."""
        keys.append(call_context().idempotency_key)
        if len(keys) == 1:
            raise ConnectionError("reset by peer")
        return "ok"

    durable = DurableAgent(agent, tools={"refund": Safety.IDEMPOTENT})
    result = await durable.run("i1", "Refund A-1", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert keys == [idempotency_key_for("i1", "c1")] * 2


async def test_model_retry_is_an_error_the_model_sees(journal: Journal) -> None:
    script = Script(call("pay", {"cents": -5}, "c1"), text("gave up"))
    agent = Agent(FunctionModel(script))

    @agent.tool_plain
    async def pay(cents: int) -> str:
        """Pay."""
        raise ModelRetry("cents must be positive")

    result = await DurableAgent(agent).run("m1", "Pay", journal=journal)
    assert result.status is RunStatus.COMPLETED
    (failed,) = [p for p in script.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert (failed.outcome, failed.tool_call_id) == ("failed", "c1")
    assert failed.content == "cents must be positive"
    state = await journal.require("m1")
    assert state.calls["c1"].results[1].payload["outcome"] == "error"


async def test_arguments_pydantic_refuses_never_reach_the_tool(journal: Journal) -> None:
    script = Script(call("pay", {"cents": "lots"}, "c1"), text("could not pay"))
    agent = Agent(FunctionModel(script))
    paid: list[int] = []

    @agent.tool_plain
    async def pay(cents: int) -> str:
        """Pay."""
        paid.append(cents)
        return "ok"

    result = await DurableAgent(agent).run("a1", "Pay", journal=journal)
    assert result.status is RunStatus.COMPLETED and paid == []
    (failed,) = [p for p in script.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert (failed.tool_name, failed.outcome) == ("pay", "failed")
    assert "cents" in str(failed.content)


async def test_requires_approval_is_bides_gate(journal: Journal) -> None:
    script = Script(call("wire", {"cents": 900}, "c1"), text("wired"))
    agent = Agent(FunctionModel(script))
    wired: list[int] = []

    @agent.tool_plain(requires_approval=True)
    async def wire(cents: int) -> str:
        """Wire money."""
        wired.append(cents)
        return "ok"

    durable = DurableAgent(agent)
    paused = await durable.run("g1", "Wire 9.00", journal=journal)
    assert paused.status is RunStatus.WAITING and wired == []
    assert [(w.kind, w.call_id) for w in paused.waiting] == [("approval", "c1")]
    await journal.approve("g1", "c1", by="alice")
    done = await durable.resume("g1", journal=journal)
    assert (done.status, wired) == (RunStatus.COMPLETED, [900])


class Invoice(BaseModel):
    customer: str
    cents: int


async def test_typed_output_is_validated_from_the_final_text(journal: Journal) -> None:
    script = Script(text('{"customer": "ann", "cents": 500}'))
    durable = DurableAgent(Agent(FunctionModel(script), output_type=Invoice))
    result = await durable.run("o1", "Invoice ann", journal=journal)
    assert durable.typed_output(result) == Invoice(customer="ann", cents=500)


async def test_typed_output_comes_from_pydantic_ais_output_tool(journal: Journal) -> None:
    """The model is offered Pydantic AI's ``final_result`` tool; calling it ends the run."""
    script = Script(call("final_result", {"customer": "bob", "cents": 7}, "c1"))
    durable = DurableAgent(Agent(FunctionModel(script), output_type=Invoice))
    result = await durable.run("o2", "Invoice bob", journal=journal)
    assert [t.name for t in script.infos[0].output_tools] == ["final_result"]
    assert durable.typed_output(result) == Invoice(customer="bob", cents=7)
    state = await journal.require("o2")
    assert state.calls == {}  # the output tool is the answer, not a call bide runs
    counted = Script(call("final_result", {"response": 42}, "c1"))
    durable_int = DurableAgent(Agent(FunctionModel(counted), output_type=int))
    assert durable_int.typed_output(await durable_int.run("o3", "Count", journal=journal)) == 42
    wrong = Script(text("not json"))
    durable_bad = DurableAgent(Agent(FunctionModel(wrong), output_type=Invoice))
    with pytest.raises(UnexpectedModelBehavior, match="is not a"):
        durable_bad.typed_output(await durable_bad.run("o4", "Invoice", journal=journal))


async def test_the_request_limit_bounds_the_turns(journal: Journal) -> None:
    script = Script(*[call("tick", {}, f"c{n}") for n in range(5)])
    agent = Agent(FunctionModel(script))

    @agent.tool_plain
    def tick() -> str:
        """Tick."""
        return "tock"

    durable = DurableAgent(
        agent, tools={"tick": Safety.READ_ONLY}, usage_limits=UsageLimits(request_limit=2)
    )
    with pytest.raises(BudgetError):
        await durable.run("u1", "Tick", journal=journal)
    assert len(script.requests) == 2


def test_what_bide_cannot_journal_is_refused_when_built() -> None:
    dynamic = Agent(TestModel())

    @dynamic.instructions
    def today() -> str:
        return "It is Monday."

    with pytest.raises(ConfigError, match="computed by a function"):
        DurableAgent(dynamic)
    with pytest.raises(ConfigError, match=r"does not have: \['nope'\]"):
        DurableAgent(Agent(TestModel()), tools={"nope": Safety.READ_ONLY})
    with pytest.raises(ConfigError, match=r"runtime\.Safety or a ToolPolicy"):
        DurableAgent(Agent(TestModel()), tools={"x": "read_only"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="output_type"):
        DurableAgent(Agent(TestModel(), output_type=ToolOutput(Invoice)))
    inner: AbstractToolset[Any] = Agent(TestModel()).toolsets[0]
    with pytest.raises(ConfigError, match="only function toolsets"):
        DurableAgent(Agent(TestModel(), toolsets=[WrapperToolset(inner)]))
    with pytest.raises(ConfigError, match=r"pydantic_ai\.Agent"):
        DurableAgent(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"safety must be a runtime\.Safety"):
        ToolPolicy("side_effect")  # type: ignore[arg-type]

    async def find(attempt: Any) -> Any:
        return None

    with_tool = Agent(TestModel())
    with_tool.tool_plain(lambda: "x", name="look")
    with pytest.raises(ConfigError, match="only a SIDE_EFFECT halts"):
        DurableAgent(with_tool, tools={"look": ToolPolicy(Safety.READ_ONLY, reconcile=find)})


async def test_mcp_tools_run_under_the_mcp_adapters_rules(journal: Journal) -> None:
    """An MCP server's tools come through ``adapters.mcp`` (``extra_tools``): untrusted
    annotations make each a side effect, and the call's key reaches the server in ``_meta``."""
    from mcp import StdioServerParameters

    from adapters.mcp import connect, tools
    from tests.conftest import ROOT

    key = idempotency_key_for("mcp-1", "c1")
    script = Script(
        call("refund", {"order_id": "A-1", "cents": 500}, "c1"),
        call("find_refund", {"idempotency_key": key}, "c2"),
        text("refunded"),
    )
    server = StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "examples" / "mcp_server.py")]
    )
    async with connect(server) as session:
        desk = await tools(session)
        durable = DurableAgent(Agent(FunctionModel(script)), extra_tools=desk)
        result = await durable.run("mcp-1", "Refund A-1", journal=journal)
    assert result.status is RunStatus.COMPLETED
    assert [t.name for t in script.infos[0].function_tools] == [t.spec.name for t in desk]
    state = await journal.require("mcp-1")
    assert {cs.plan["safety"] for cs in state.calls.values()} == {"side_effect"}
    found = state.calls["c2"].results[1].payload["value"]
    assert "a refund of 500 cents has this key" in json.dumps(found), found
