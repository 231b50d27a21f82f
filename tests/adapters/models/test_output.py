"""A typed answer from each provider, asked for the way the provider does it best: OpenAI as a
JSON-schema response format, Anthropic as the output tool. Against a real HTTP server and a real
journal; a bad answer goes back to the model, which answers again."""

from __future__ import annotations

import json

import pydantic

from runtime import Agent, Journal, RunStatus, Usage, UsageLimits, UserMessage
from runtime.output import OUTPUT_TOOL
from tests.adapters.models.conftest import Models
from tests.adapters.models.provider_server import (
    JSONReply,
    ProviderServer,
    SSEReply,
    anthropic_events,
    openai_text_stream,
)


class Invoice(pydantic.BaseModel):
    customer: str
    cents: int


async def test_openai_asks_for_a_json_schema_response_format(
    server: ProviderServer, models: Models, journal: Journal
) -> None:
    server.script(
        openai_text_stream('{"customer": "ann"}'),
        openai_text_stream('{"customer": "ann", "cents": 5}'),
    )
    agent = Agent(model=models.openai(), output_type=Invoice)
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Invoice(customer="ann", cents=5)
    first, second = server.received
    response_format = first.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == OUTPUT_TOOL
    assert response_format["json_schema"]["schema"]["required"] == ["customer", "cents"]
    assert "tools" not in first.body  # no output tool: the format asks for the answer
    # The retry shows the model its own text, then a user message naming what was wrong.
    assert second.body["messages"][-2] == {"role": "assistant", "content": '{"customer": "ann"}'}
    retry = second.body["messages"][-1]
    assert retry["role"] == "user" and "cents" in retry["content"]


async def test_anthropic_asks_for_the_output_tool(
    server: ProviderServer, models: Models, journal: Journal
) -> None:
    server.script(
        SSEReply(
            anthropic_events(
                [{"id": "toolu_A", "name": OUTPUT_TOOL, "json": json.dumps({"customer": "ann"})}],
                stop_reason="tool_use",
            )
        ),
        SSEReply(
            anthropic_events(
                [
                    {
                        "id": "toolu_B",
                        "name": OUTPUT_TOOL,
                        "json": json.dumps({"customer": "ann", "cents": 7}),
                    }
                ],
                stop_reason="tool_use",
            )
        ),
    )
    agent = Agent(model=models.anthropic(), output_type=Invoice)
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Invoice(customer="ann", cents=7)
    first, second = server.received
    (offered,) = first.body["tools"]
    assert offered["name"] == OUTPUT_TOOL
    assert offered["input_schema"]["required"] == ["customer", "cents"]
    # The invalid call's error result is what the model reads before answering again.
    told = second.body["messages"][-1]["content"][0]
    assert told["type"] == "tool_result" and told["tool_use_id"] == "toolu_A"
    assert told["is_error"] is True and "cents" in told["content"]


async def test_a_cost_the_server_reports_is_kept_and_limited(
    server: ProviderServer, models: Models, journal: Journal
) -> None:
    def answer(text: str, cost: object) -> JSONReply:
        return JSONReply(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "test-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 2,
                    "total_tokens": 12,
                    "cost": cost,
                },
            }
        )

    server.script(answer('{"customer": "ann"}', 0.004), answer("{}", "free"))
    agent = Agent(
        model=models.openai(stream=False),
        output_type=Invoice,
        output_retries=3,
        usage_limits=UsageLimits(cost=0.003),
    )
    result = await agent.run("r", "bill ann", journal=journal)
    assert result.status is RunStatus.FAILED
    assert result.usage == Usage(10, 2, 0.004)
    assert result.error == "usage limit cost=0.003 exceeded: 0.004 spent"
    assert len(server.received) == 1  # over the limit before a second request
    # A cost that is not a number is not a cost.
    turn = await models.openai(stream=False).complete(None, [UserMessage("hi")], [])
    assert turn.usage == Usage(10, 2)
