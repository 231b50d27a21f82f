"""Anthropic's Messages API as a bide ``Model``, on the official ``anthropic`` SDK."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from adapters.models._errors import RETRYABLE_ERROR_TYPES, error_detail, error_from_status
from adapters.models._wire import (
    DEFAULT_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    SDK,
    CallIds,
    ProviderModel,
    Request,
    ToolNames,
    check_options,
    json_schema,
    missing_sdk,
    parse_arguments,
    result_text,
    tool_entry,
)
from runtime import OutputSpec
from runtime.errors import ConfigError, ModelError, ProtocolError
from runtime.events import delta as text_delta
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from runtime.tools import ToolSpec
from runtime.tracing import trace_headers

try:
    import anthropic
    import httpx2
    from anthropic.types import MessageParam, RawMessageStreamEvent, ToolParam
except ImportError as exc:  # pragma: no cover - exercised in a child process by the tests
    raise missing_sdk("adapters.models.anthropic", "anthropic", exc) from exc

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_TOTAL_TIMEOUT", "FINISH_REASONS", "AnthropicModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"

FINISH_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic's ``stop_reason`` in the vocabulary bide's turns share with Chat Completions.

Any other value (``pause_turn``, which only server-side tools produce) is recorded as it came.
"""


class AnthropicModel(ProviderModel[anthropic.AsyncAnthropic]):
    """A Claude model behind the Messages API (``/v1/messages``), streamed.

    ``api_key`` wins over the environment variable named by ``api_key_env``; the SDK's own search
    for credentials (profiles, workload identity, ``ANTHROPIC_BASE_URL``) is not consulted, so
    the key and the host are exactly what this object was given.

    ``timeout`` bounds how long the server may stay silent (connecting, before the first event,
    between events); ``total_timeout`` bounds the whole turn (``DEFAULT_TIMEOUT``, 60 s, and
    ``DEFAULT_TOTAL_TIMEOUT``, 600 s, unless given; ``total_timeout=None`` lifts that bound, and
    a server that trickles keep-alives then holds the drive for ever). Streaming is always
    used: it is what keeps a long answer within a short ``timeout``, and the SDK refuses long
    non-streamed requests. The SDK's own retries are off; wrap the model in ``RetryingModel``
    to retry.

    The Messages API of this SDK generation takes no sampling parameters (``temperature`` and
    ``top_p`` are gone); ``effort`` sets ``output_config.effort``, and ``extra_body`` reaches
    anything else a compatible server accepts.

    Only text and ``tool_use`` blocks become part of a turn. Extended thinking is not requested:
    its blocks would have to be sent back with the tool results, and a turn has no place for them.
    Each request carries the active span's W3C ``traceparent`` (see ``runtime.tracing``).
    """

    provider_name = "anthropic"
    """The ``gen_ai.provider.name`` of this model's spans."""

    _sdk = SDK(
        anthropic.AsyncAnthropic,
        anthropic.AnthropicError,
        anthropic.APITimeoutError,
        anthropic.APIConnectionError,
    )

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        base_url: str | None = None,
        max_tokens: int = 4096,
        timeout: float = DEFAULT_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ):
        check_options(
            "AnthropicModel",
            model=model,
            timeout=timeout,
            total_timeout=total_timeout,
            max_tokens=max_tokens,
            temperature=None,
            max_tokens_required=True,
        )
        if effort not in (None, "low", "medium", "high", "xhigh", "max"):
            raise ConfigError(
                "AnthropicModel: effort is one of 'low', 'medium', 'high', 'xhigh', 'max' or None"
            )
        self.max_tokens = max_tokens
        self.effort = effort
        self._connect(
            provider="AnthropicModel",
            label="Anthropic API",
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=timeout,
            total_timeout=total_timeout,
            extra_headers=extra_headers,
            extra_body=extra_body,
        )

    def _prepare(
        self,
        prompt: str | None,
        turns: Sequence[Message],
        names: ToolNames,
        output: OutputSpec | None,
    ) -> Request:
        # A typed answer is asked for as the output tool, which ``names`` holds already.
        wire_messages = _encode_messages(turns, names)
        wire_tools = [_encode_tool(spec, names) for spec in names.specs]
        return lambda: self._streamed(prompt, wire_messages, wire_tools)

    async def _streamed(
        self,
        system_prompt: str | None,
        wire_messages: list[MessageParam],
        wire_tools: list[ToolParam],
    ) -> _Draft:
        draft = _Draft()
        try:
            stream = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=wire_messages,
                system=system_prompt if system_prompt else anthropic.omit,
                tools=wire_tools if wire_tools else anthropic.omit,
                output_config={"effort": self.effort} if self.effort else anthropic.omit,
                extra_body=self.extra_body,
                extra_headers=trace_headers() or None,
                stream=True,
            )
            async with stream:
                self._require_event_stream(stream.response.headers)
                async for event in stream:
                    draft.add(event)
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        # The SDK wraps transport failures while connecting, not while reading the stream.
        except httpx2.TimeoutException as exc:
            raise self._stayed_silent() from exc
        except httpx2.TransportError as exc:
            raise self._connection_failed(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._not_json("sent a stream event", exc) from exc
        if not draft.stopped:
            raise self._unfinished("message_stop")
        if draft.stop_reason is None:
            raise ModelError(
                f"{self._label}: the stream finished without a stop_reason", retryable=False
            )
        return draft

    def _api_error(self, exc: Exception) -> ModelError | None:
        if isinstance(exc, anthropic.APIStatusError):
            detail = error_detail(exc.body, exc.message)
            if exc.status_code >= 400:
                return error_from_status(self._label, exc.status_code, exc.response.headers, detail)
            # An error event inside a 200 stream: only its type tells what it was.
            return ModelError(
                f"{self._label} reported {exc.type or 'an error'} mid-stream: {detail}",
                retryable=exc.type in RETRYABLE_ERROR_TYPES,
            )
        return None


@dataclass
class _Block:
    type: str
    id: str | None = None
    name: str = ""
    text: list[str] = field(default_factory=list)
    input_json: list[str] = field(default_factory=list)
    input: Any = None


@dataclass
class _Draft:
    """The message as its events arrive, before it is checked and becomes a turn."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    stopped: bool = False

    def add(self, event: RawMessageStreamEvent) -> None:
        if event.type == "message_start":
            self._count_input(event.message.usage)
            self.output_tokens = event.message.usage.output_tokens or 0
        elif event.type == "content_block_start":
            start = event.content_block
            block = _Block(type=start.type)
            if start.type == "tool_use":
                block.id, block.name, block.input = start.id, start.name, start.input
            elif start.type == "text" and start.text:
                block.text.append(start.text)
                text_delta(start.text)
            self.blocks[event.index] = block
        elif event.type == "content_block_delta":
            block = self.blocks.setdefault(event.index, _Block(type="unknown"))
            delta = event.delta
            if delta.type == "text_delta":
                block.text.append(delta.text)
                text_delta(delta.text)  # to whoever follows the run, live only
            elif delta.type == "input_json_delta":
                block.input_json.append(delta.partial_json)
        elif event.type == "message_delta":
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            # Counts on message_delta are running totals: they replace, never add.
            self.output_tokens = event.usage.output_tokens or self.output_tokens
            if event.usage.input_tokens is not None:
                self._count_input(event.usage)
        elif event.type == "message_stop":
            self.stopped = True

    def _count_input(self, usage: Any) -> None:
        # Cached prompt tokens are prompt tokens too; Anthropic reports them apart.
        self.input_tokens = sum(
            getattr(usage, name, None) or 0
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )

    def to_turn(self, names: ToolNames, ids: CallIds, label: str) -> AssistantTurn:
        finish = FINISH_REASONS.get(self.stop_reason or "", self.stop_reason or "stop")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.type == "text":
                texts.append("".join(block.text))
            elif block.type == "tool_use":
                if not block.name:
                    raise ModelError(f"{label}: the model made a tool call without a name")
                if block.input_json:
                    arguments = parse_arguments(
                        "".join(block.input_json),
                        provider=label,
                        tool=block.name,
                        finish_reason=finish,
                    )
                else:
                    arguments = parse_arguments(
                        json.dumps(block.input if block.input is not None else {}),
                        provider=label,
                        tool=block.name,
                        finish_reason=finish,
                    )
                calls.append(ToolCall(ids.assign(block.id), names.from_wire(block.name), arguments))
        return AssistantTurn(
            text="".join(texts) or None,
            tool_calls=tuple(calls),
            usage=Usage(self.input_tokens, self.output_tokens),
            finish_reason=finish,
        )


def _encode_tool(spec: ToolSpec, names: ToolNames) -> ToolParam:
    return cast(ToolParam, tool_entry(spec, names, "input_schema"))


def _encode_messages(messages: Sequence[Message], names: ToolNames) -> list[MessageParam]:
    """The conversation as alternating user and assistant messages of content blocks.

    A turn's tool results travel together in the one user message that follows it, each as a
    ``tool_result`` block that keeps ``is_error``; blocks of one role in a row share a message.
    """
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, UserMessage):
            push("user", [{"type": "text", "text": message.text}])
        elif isinstance(message, AssistantTurn):
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": names.to_wire(call.name),
                    "input": _arguments_object(call),
                }
                for call in message.tool_calls
            )
            push("assistant", blocks)
        elif isinstance(message, ToolResultMessage):
            push(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.call_id,
                        "content": result_text(message),
                        "is_error": message.is_error,
                    }
                ],
            )
        else:
            raise ProtocolError(f"not a conversation message: {message!r}")
    return cast(list[MessageParam], out)


def _arguments_object(call: ToolCall) -> dict[str, Any]:
    if not isinstance(call.arguments, Mapping):
        raise ProtocolError(
            f"call {call.id} ({call.name}) has arguments that are not an object; the Messages "
            "API cannot carry them",
            call_id=call.id,
        )
    return json_schema(call.arguments)
