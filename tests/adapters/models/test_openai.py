"""OpenAIChatModel against a real HTTP server speaking Chat Completions (streamed and whole)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.models.openai import OpenAIChatModel
from runtime.errors import ConfigError, ModelError
from runtime.messages import AssistantTurn, ToolCall, ToolResultMessage, Usage, UserMessage
from tests.adapters.models.conftest import ADD, HELLO, READ, READ_WIRE, Models
from tests.adapters.models.provider_server import (
    JSONReply,
    ProviderServer,
    SSEReply,
    openai_chunk,
    openai_events,
    openai_text_stream,
)


def tool_delta(
    index: int, *, id: str | None = None, name: str | None = None, args: str = ""
) -> Any:
    piece: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if id is not None:
        piece["id"] = id
        piece["type"] = "function"
    if name is not None:
        piece["function"]["name"] = name
    return {"tool_calls": [piece]}


def calls_stream(*deltas: Any, finish: str | None = "tool_calls", done: bool = True) -> SSEReply:
    chunks = [openai_chunk(d) for d in deltas]
    if finish is not None:
        chunks += [openai_chunk(finish_reason=finish), openai_chunk(choices=False, usage=(11, 7))]
    return SSEReply(openai_events(*chunks, done=done))


async def test_streamed_tool_calls_keep_ids_parse_arguments_and_report_usage(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        calls_stream(
            {"role": "assistant", "content": "Let me "},
            {"content": "check."},
            tool_delta(0, id="call_A", name="add"),
            tool_delta(0, args='{"a": 2,'),
            tool_delta(1, id="call_B", name=READ_WIRE, args='{"path"'),
            tool_delta(0, args=' "b": 3}'),
            tool_delta(1, args=': "/etc/hosts"}'),
        )
    )
    turn = await models.openai().complete(None, HELLO, [ADD, READ])

    assert turn == AssistantTurn(
        text="Let me check.",
        tool_calls=(
            ToolCall("call_A", "add", {"a": 2, "b": 3}),
            ToolCall("call_B", "files.read", {"path": "/etc/hosts"}),
        ),
        usage=Usage(11, 7),
        finish_reason="tool_calls",
    )
    (request,) = server.received
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers",
                "parameters": dict(ADD.input_schema),
            },
        },
        {
            "type": "function",
            "function": {
                "name": READ_WIRE,
                "description": "Read a file",
                "parameters": dict(READ.input_schema),
            },
        },
    ]


async def test_conversation_encodes_tool_calls_and_results_and_marks_errors(
    server: ProviderServer, models: Models
) -> None:
    server.script(openai_text_stream("5, and /x is missing"))
    conversation = [
        UserMessage("add 2 and 3, then read /x"),
        AssistantTurn(
            text=None,
            tool_calls=(
                ToolCall("call_A", "add", {"a": 2, "b": 3}),
                ToolCall("call_B", "files.read", {"path": "/x"}),
            ),
            finish_reason="tool_calls",
        ),
        ToolResultMessage("call_A", "add", 5),
        ToolResultMessage("call_B", "files.read", {"errno": 2, "why": "no file"}, is_error=True),
    ]
    turn = await models.openai().complete("You are terse.", conversation, [ADD, READ])

    assert turn.text == "5, and /x is missing"
    assert server.received[0].body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "add 2 and 3, then read /x"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_A",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                },
                {
                    "id": "call_B",
                    "type": "function",
                    "function": {"name": READ_WIRE, "arguments": '{"path": "/x"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_A", "content": "5"},
        {
            "role": "tool",
            "tool_call_id": "call_B",
            "content": 'Error: {"errno": 2, "why": "no file"}',
        },
    ]


async def test_text_only_turns_and_string_results_are_sent_as_plain_text(
    server: ProviderServer, models: Models
) -> None:
    server.script(openai_text_stream())
    conversation = [
        UserMessage("hello"),
        AssistantTurn(text="Reading.", tool_calls=(ToolCall("c1", "files.read", {"path": "a"}),)),
        ToolResultMessage("c1", "files.read", "line one\nline two"),
        AssistantTurn(text="It has two lines."),
        UserMessage("thanks"),
    ]
    await models.openai().complete(None, conversation, [READ])

    sent = server.received[0].body["messages"]
    assert sent[1]["content"] == "Reading."
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "line one\nline two"}
    assert sent[3] == {"role": "assistant", "content": "It has two lines."}
    assert sent[4] == {"role": "user", "content": "thanks"}
    assert "tools" in server.received[0].body


async def test_options_reach_the_request(server: ProviderServer, models: Models) -> None:
    server.script(openai_text_stream(), openai_text_stream())
    await models.openai(
        max_tokens=100,
        temperature=0.2,
        extra_body={"top_k": 5},
        extra_headers={"x-tenant": "t1"},
    ).complete(None, HELLO, [])
    await models.openai(max_tokens=50, max_tokens_field="max_tokens", stream_usage=False).complete(
        None, HELLO, []
    )

    first, second = (r.body for r in server.received)
    assert (first["max_completion_tokens"], first["temperature"], first["top_k"]) == (100, 0.2, 5)
    assert "max_tokens" not in first
    assert "tools" not in first
    assert server.received[0].headers["x-tenant"] == "t1"
    assert second["max_tokens"] == 50
    assert "max_completion_tokens" not in second
    assert "stream_options" not in second
    assert "temperature" not in second


@pytest.mark.parametrize("done_marker", [True, False], ids=["with-DONE", "without-DONE"])
async def test_stream_that_ends_without_finish_reason_is_a_retryable_error(
    server: ProviderServer, models: Models, done_marker: bool
) -> None:
    server.script(
        calls_stream(
            {"content": "Let me"},
            tool_delta(0, id="call_A", name="add", args='{"a": 2, "b": 3}'),
            finish=None,
            done=done_marker,
        )
    )
    with pytest.raises(ModelError, match="ended before the model finished") as caught:
        await models.openai().complete(None, HELLO, [ADD])
    assert caught.value.retryable is True
    assert caught.value.status_code is None


async def test_stream_dropped_mid_body_is_a_retryable_connection_error(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        SSEReply(openai_events(openai_chunk({"content": "Let me"}), done=False), end="drop")
    )
    with pytest.raises(ModelError, match="connection failed") as caught:
        await models.openai().complete(None, HELLO, [])
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ('{"a": 2,', "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        ("[2, 3]", "not a JSON object"),
        ('"2 and 3"', "not a JSON object"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than 100 levels deep"),
    ],
)
async def test_tool_arguments_that_are_not_a_json_object_are_a_non_retryable_error(
    server: ProviderServer, models: Models, arguments: str, complaint: str
) -> None:
    server.script(calls_stream(tool_delta(0, id="call_A", name="add", args=arguments)))
    with pytest.raises(ModelError, match=complaint) as caught:
        await models.openai().complete(None, HELLO, [ADD])
    assert caught.value.retryable is False


async def test_arguments_cut_off_by_max_tokens_say_to_raise_it(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        calls_stream(tool_delta(0, id="call_A", name="add", args='{"a": 2, "b'), finish="length")
    )
    with pytest.raises(ModelError, match="max_tokens") as caught:
        await models.openai().complete(None, HELLO, [ADD])
    assert caught.value.retryable is False


async def test_tool_call_without_arguments_has_empty_object_arguments(
    server: ProviderServer, models: Models
) -> None:
    server.script(calls_stream(tool_delta(0, id="call_A", name="add")))
    turn = await models.openai().complete(None, HELLO, [ADD])
    assert turn.tool_calls == (ToolCall("call_A", "add", {}),)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        ({"message": "The server had an error", "type": "server_error"}, True),
        ({"message": "Rate limited", "type": "requests", "code": "rate_limit_exceeded"}, True),
        ({"message": "Invalid schema", "type": "invalid_request_error"}, False),
    ],
)
async def test_error_event_inside_a_stream_is_classified_by_its_type(
    server: ProviderServer, models: Models, error: dict[str, str], retryable: bool
) -> None:
    server.script(
        SSEReply(
            [
                f"data: {json.dumps(openai_chunk({'content': 'Let'}))}\n\n",
                f"data: {json.dumps({'error': error})}\n\n",
            ]
        )
    )
    with pytest.raises(ModelError, match=error["message"]) as caught:
        await models.openai().complete(None, HELLO, [])
    assert caught.value.retryable is retryable


def completion(message: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 13, "completion_tokens": 4, "total_tokens": 17},
    }


async def test_unstreamed_mode_reads_a_whole_completion(
    server: ProviderServer, models: Models
) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_A",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
            }
        ],
    }
    server.script(JSONReply(completion(message, "tool_calls")))
    turn = await models.openai(stream=False).complete(None, HELLO, [ADD])

    assert turn == AssistantTurn(
        text=None,
        tool_calls=(ToolCall("call_A", "add", {"a": 1, "b": 2}),),
        usage=Usage(13, 4),
        finish_reason="tool_calls",
    )
    assert server.received[0].body.get("stream") in (False, None)
    assert "stream_options" not in server.received[0].body


async def test_unstreamed_completion_without_finish_reason_is_a_non_retryable_error(
    server: ProviderServer, models: Models
) -> None:
    server.script(JSONReply(completion({"role": "assistant", "content": "half"}, None)))
    with pytest.raises(ModelError, match="no finish_reason") as caught:
        await models.openai(stream=False).complete(None, HELLO, [])
    assert caught.value.retryable is False


async def test_server_that_ignores_stream_true_is_told_apart_from_a_truncated_stream(
    server: ProviderServer, models: Models
) -> None:
    server.script(JSONReply(completion({"role": "assistant", "content": "hi"}, "stop")))
    with pytest.raises(ModelError, match="stream=False") as caught:
        await models.openai().complete(None, HELLO, [])
    assert caught.value.retryable is False


async def test_refusal_is_the_turn_text_when_there_is_no_content(
    server: ProviderServer, models: Models
) -> None:
    server.script(
        SSEReply(
            openai_events(
                openai_chunk({"role": "assistant", "refusal": "I can't help with that."}),
                openai_chunk(finish_reason="stop"),
            )
        )
    )
    turn = await models.openai().complete(None, HELLO, [])
    assert turn.text == "I can't help with that."
    assert (turn.finish_reason, turn.usage) == ("stop", Usage())


async def test_missing_and_reused_call_ids_are_replaced_by_fresh_unique_ones(
    server: ProviderServer, models: Models
) -> None:
    """The journal keys results by call id, so an id seen earlier in the run cannot come back."""
    server.script(
        calls_stream(
            tool_delta(0, id="call_0", name="add", args='{"a": 1, "b": 1}'),
            {"tool_calls": [{"index": 1, "function": {"name": "add", "arguments": "{}"}}]},
            tool_delta(2, id="call_9", name="add", args="{}"),
        )
    )
    earlier = [
        UserMessage("go"),
        AssistantTurn(tool_calls=(ToolCall("call_0", "add", {"a": 0, "b": 0}),)),
        ToolResultMessage("call_0", "add", 0),
    ]
    turn = await models.openai().complete(None, earlier, [ADD])

    ids = [call.id for call in turn.tool_calls]
    assert ids[0] != "call_0"
    assert ids[1]
    assert ids[2] == "call_9"
    assert len(set(ids)) == 3


@pytest.mark.parametrize(
    "options",
    [
        {"model": ""},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"total_timeout": -1},
        {"max_tokens": 0},
        {"max_tokens": True},
        {"temperature": -0.5},
        {"max_tokens_field": "max_output_tokens"},
        {"api_key": ""},
    ],
)
def test_invalid_options_are_config_errors(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"model": "gpt-test", "api_key": "sk-test", **options}
    with pytest.raises(ConfigError):
        OpenAIChatModel(**arguments)
