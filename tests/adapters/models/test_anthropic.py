"""AnthropicModel against a real HTTP server speaking the Messages API's event stream."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.models.anthropic import AnthropicModel
from runtime.errors import ConfigError, ModelError
from runtime.messages import AssistantTurn, ToolCall, ToolResultMessage, Usage, UserMessage
from tests.adapters.models.conftest import ADD, HELLO, READ, READ_WIRE, Models
from tests.adapters.models.provider_server import (
    JSONReply,
    ProviderServer,
    SSEReply,
    anthropic_event,
    anthropic_events,
    anthropic_text_stream,
)


async def test_streamed_tool_use_keeps_ids_parses_input_and_reports_usage(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        SSEReply(
            anthropic_events(
                [
                    {"text": "Let me check."},
                    {"id": "toolu_A", "name": "add", "json": '{"a": 2, "b": 3}'},
                    {"id": "toolu_B", "name": READ_WIRE, "json": '{"path": "/etc/hosts"}'},
                ],
                stop_reason="tool_use",
                usage=(11, 7),
                cache=(5, 20),
            )
        )
    )
    turn = await models.anthropic().complete(None, HELLO, [ADD, READ])

    assert turn == AssistantTurn(
        text="Let me check.",
        tool_calls=(
            ToolCall("toolu_A", "add", {"a": 2, "b": 3}),
            ToolCall("toolu_B", "files.read", {"path": "/etc/hosts"}),
        ),
        usage=Usage(11 + 5 + 20, 7),
        finish_reason="tool_calls",
    )
    (request,) = server.received
    assert (request.method, request.path) == ("POST", "/v1/messages")
    # anthropic 2.x sends the API key as a bearer token, no longer as x-api-key.
    assert request.headers["authorization"] == "Bearer sk-ant-test"
    assert request.headers["anthropic-version"]
    assert request.body["stream"] is True
    assert request.body["max_tokens"] == 4096
    assert "system" not in request.body
    assert request.body["tools"] == [
        {"name": "add", "description": "Add two numbers", "input_schema": dict(ADD.input_schema)},
        {"name": READ_WIRE, "description": "Read a file", "input_schema": dict(READ.input_schema)},
    ]


async def test_conversation_groups_a_turns_tool_results_into_one_user_message(
    server: ProviderServer, models: Models
) -> None:
    server.script(anthropic_text_stream("5, and /x is missing"))
    conversation = [
        UserMessage("add 2 and 3, then read /x"),
        AssistantTurn(
            text="On it.",
            tool_calls=(
                ToolCall("toolu_A", "add", {"a": 2, "b": 3}),
                ToolCall("toolu_B", "files.read", {"path": "/x"}),
            ),
            finish_reason="tool_calls",
        ),
        ToolResultMessage("toolu_A", "add", 5),
        ToolResultMessage("toolu_B", "files.read", {"errno": 2, "why": "no file"}, is_error=True),
    ]
    turn = await models.anthropic().complete("You are terse.", conversation, [ADD, READ])

    assert turn.text == "5, and /x is missing"
    body = server.received[0].body
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add 2 and 3, then read /x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "toolu_A", "name": "add", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "toolu_B", "name": READ_WIRE, "input": {"path": "/x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_A",
                    "content": "5",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_B",
                    "content": '{"errno": 2, "why": "no file"}',
                    "is_error": True,
                },
            ],
        },
    ]


async def test_a_turn_with_only_tool_calls_sends_no_empty_text_block(
    server: ProviderServer, models: Models
) -> None:
    server.script(anthropic_text_stream())
    conversation = [
        UserMessage("read a"),
        AssistantTurn(tool_calls=(ToolCall("toolu_A", "files.read", {"path": "a"}),)),
        ToolResultMessage("toolu_A", "files.read", "contents"),
        AssistantTurn(text="It says contents."),
        UserMessage("thanks"),
    ]
    await models.anthropic().complete(None, conversation, [READ])

    sent = server.received[0].body["messages"]
    assert sent[1]["content"] == [
        {"type": "tool_use", "id": "toolu_A", "name": READ_WIRE, "input": {"path": "a"}}
    ]
    assert sent[3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "It says contents."}],
    }
    assert sent[4] == {"role": "user", "content": [{"type": "text", "text": "thanks"}]}


async def test_options_reach_the_request(server: ProviderServer, models: Models) -> None:
    server.script(anthropic_text_stream())
    await models.anthropic(
        max_tokens=256,
        effort="low",
        extra_body={"top_k": 5},
        extra_headers={"anthropic-beta": "some-beta"},
    ).complete("Be brief.", HELLO, [])

    request = server.received[0]
    assert request.body["max_tokens"] == 256
    assert request.body["output_config"] == {"effort": "low"}
    assert request.body["top_k"] == 5
    assert request.body["system"] == "Be brief."
    assert "tools" not in request.body
    assert request.headers["anthropic-beta"] == "some-beta"


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
async def test_stop_reason_maps_onto_the_shared_finish_reasons(
    server: ProviderServer, models: Models, stop_reason: str, finish_reason: str
) -> None:
    server.script(SSEReply(anthropic_events([{"text": "ok"}], stop_reason=stop_reason)))
    turn = await models.anthropic().complete(None, HELLO, [])
    assert turn.finish_reason == finish_reason


async def test_stream_that_ends_without_message_stop_is_a_retryable_error(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        SSEReply(
            anthropic_events(
                [{"id": "toolu_A", "name": "add", "json": '{"a": 2, "b": 3}'}],
                stop_reason="tool_use",
                stop=False,
            )
        )
    )
    with pytest.raises(ModelError, match="ended before the model finished") as caught:
        await models.anthropic().complete(None, HELLO, [ADD])
    assert caught.value.retryable is True


async def test_stream_dropped_mid_body_is_a_retryable_connection_error(
    server: ProviderServer, models: Models
) -> None:
    events = anthropic_events([{"text": "Let me check."}])
    server.script(SSEReply(events[:4], end="drop"))
    with pytest.raises(ModelError, match="connection failed") as caught:
        await models.anthropic().complete(None, HELLO, [])
    assert caught.value.retryable is True


async def test_finished_stream_without_stop_reason_is_a_non_retryable_error(
    server: ProviderServer, models: Models
) -> None:
    server.script(SSEReply(anthropic_events([{"text": "ok"}], stop_reason=None)))
    with pytest.raises(ModelError, match="without a stop_reason") as caught:
        await models.anthropic().complete(None, HELLO, [])
    assert caught.value.retryable is False


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ('{"a": 2,', "not valid JSON"),
        ("[2, 3]", "not a JSON object"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than 100 levels deep"),
    ],
)
async def test_tool_input_that_is_not_a_json_object_is_a_non_retryable_error(
    server: ProviderServer, models: Models, raw: str, complaint: str
) -> None:
    server.script(
        SSEReply(
            anthropic_events(
                [{"id": "toolu_A", "name": "add", "json": raw}], stop_reason="tool_use"
            )
        )
    )
    with pytest.raises(ModelError, match=complaint) as caught:
        await models.anthropic().complete(None, HELLO, [ADD])
    assert caught.value.retryable is False


async def test_tool_use_without_input_deltas_has_the_start_blocks_input(
    server: ProviderServer, models: Models
) -> None:
    block = {"id": "toolu_A", "name": "add", "json": ""}
    server.script(SSEReply(anthropic_events([block], stop_reason="tool_use")))
    turn = await models.anthropic().complete(None, HELLO, [ADD])
    assert turn.tool_calls == (ToolCall("toolu_A", "add", {}),)


@pytest.mark.parametrize(
    ("error_type", "retryable"),
    [
        ("overloaded_error", True),
        ("api_error", True),
        ("rate_limit_error", True),
        ("invalid_request_error", False),
    ],
)
async def test_error_event_inside_a_stream_is_classified_by_its_type(
    server: ProviderServer, models: Models, error_type: str, retryable: bool
) -> None:
    events = anthropic_events([{"text": "Let me check."}])[:4]
    events.append(
        anthropic_event("error", error={"type": error_type, "message": "Something happened"})
    )
    server.script(SSEReply(events))
    with pytest.raises(ModelError, match="Something happened") as caught:
        await models.anthropic().complete(None, HELLO, [])
    assert caught.value.retryable is retryable
    assert error_type in caught.value.message


async def test_server_that_answers_with_json_instead_of_a_stream_is_a_non_retryable_error(
    server: ProviderServer, models: Models
) -> None:
    server.script(JSONReply({"type": "message", "content": []}))
    with pytest.raises(ModelError, match="not an event stream") as caught:
        await models.anthropic().complete(None, HELLO, [])
    assert caught.value.retryable is False


async def test_reused_tool_use_id_is_replaced_by_a_fresh_one(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        SSEReply(
            anthropic_events(
                [{"id": "toolu_A", "name": "add", "json": "{}"}], stop_reason="tool_use"
            )
        )
    )
    earlier = [
        UserMessage("go"),
        AssistantTurn(tool_calls=(ToolCall("toolu_A", "add", {}),)),
        ToolResultMessage("toolu_A", "add", 0),
    ]
    turn = await models.anthropic().complete(None, earlier, [ADD])
    (call,) = turn.tool_calls
    assert call.id != "toolu_A"
    assert call.id


@pytest.mark.parametrize(
    "options",
    [
        {"model": " "},
        {"timeout": -1},
        {"total_timeout": 0},
        {"max_tokens": 0},
        {"max_tokens": None},
        {"effort": "maximal"},
    ],
)
def test_invalid_options_are_config_errors(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"model": "claude-test", "api_key": "sk-ant-test", **options}
    with pytest.raises(ConfigError):
        AnthropicModel(**arguments)
