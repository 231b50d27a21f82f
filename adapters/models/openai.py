"""OpenAI-compatible Chat Completions as a bide ``Model``, on the official ``openai`` SDK.

Chat Completions is the dialect every OpenAI-compatible server speaks (OpenAI, Azure, Ollama,
vLLM, llama.cpp, OpenRouter, Groq), so ``base_url`` is all it takes to switch between them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from adapters.models._errors import RETRYABLE_ERROR_TYPES, error_detail, error_from_status
from adapters.models._wire import (
    DEFAULT_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    SDK,
    CallIds,
    ProviderModel,
    Request,
    ToolNames,
    arguments_json,
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
    import openai
    from openai.types import CompletionUsage
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionChunk,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
    )
except ImportError as exc:  # pragma: no cover - exercised in a child process by the tests
    raise missing_sdk("adapters.models.openai", "openai", exc) from exc

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_TOTAL_TIMEOUT", "OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatModel(ProviderModel[openai.AsyncOpenAI]):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``api_key`` wins over the environment variable named by ``api_key_env``; a server that wants
    no key still needs some non-empty value (the SDK insists on sending one). ``base_url`` is never
    read from ``OPENAI_BASE_URL``: a stray variable should not redirect requests, nor the key.

    The answer is streamed by default, so that ``timeout`` can be a short bound on how long the
    server may stay silent (connecting, before the first token, between chunks) however long the
    whole answer takes; ``total_timeout`` bounds the whole turn (``DEFAULT_TIMEOUT``, 60 s, and
    ``DEFAULT_TOTAL_TIMEOUT``, 600 s, unless given; ``total_timeout=None`` lifts that bound, and
    a server that trickles keep-alives then holds the drive for ever). With ``stream=False`` the
    server must produce the complete answer within ``timeout``. The SDK's own retries are off;
    wrap the model in ``RetryingModel`` to retry.

    ``max_tokens`` is sent as ``max_completion_tokens`` (OpenAI's current name, the only one its
    reasoning models accept) unless ``max_tokens_field="max_tokens"`` for servers that predate it.
    ``extra_body`` is merged into each request for server-specific parameters. Each request
    carries the active span's W3C ``traceparent`` (see ``runtime.tracing``).
    """

    provider_name = "openai"
    """The ``gen_ai.provider.name`` of this model's spans (every compatible server speaks it)."""

    _sdk = SDK(
        openai.AsyncOpenAI, openai.OpenAIError, openai.APITimeoutError, openai.APIConnectionError
    )

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = DEFAULT_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        max_tokens: int | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        temperature: float | None = None,
        stream: bool = True,
        stream_usage: bool = True,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ):
        check_options(
            "OpenAIChatModel",
            model=model,
            timeout=timeout,
            total_timeout=total_timeout,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ConfigError(
                "OpenAIChatModel: max_tokens_field is 'max_completion_tokens' or 'max_tokens'"
            )
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.temperature = temperature
        self.stream = bool(stream)
        self.stream_usage = bool(stream_usage)
        self._connect(
            provider="OpenAIChatModel",
            label="OpenAI-compatible API",
            model=model,
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            total_timeout=total_timeout,
            extra_headers=extra_headers,
            extra_body=extra_body,
        )

    native_output = True  # a typed answer: response_format json_schema

    def _prepare(
        self,
        prompt: str | None,
        turns: Sequence[Message],
        names: ToolNames,
        output: OutputSpec | None,
    ) -> Request:
        wire_messages = _encode_messages(prompt, turns, names)
        wire_tools = [_encode_tool(spec, names) for spec in names.specs]
        send = self._streamed if self.stream else self._whole
        response_format = _response_format(output) if output is not None else None
        return lambda: send(wire_messages, wire_tools, response_format)

    async def _streamed(
        self,
        wire_messages: list[ChatCompletionMessageParam],
        wire_tools: list[ChatCompletionFunctionToolParam],
        response_format: dict[str, Any] | None,
    ) -> _Draft:
        draft = _Draft()
        try:
            stream = await self._client.chat.completions.create(
                **self._options(wire_messages, wire_tools, response_format),
                stream=True,
                stream_options={"include_usage": True} if self.stream_usage else openai.omit,
            )
            async with stream:
                self._require_event_stream(
                    stream.response.headers,
                    "; construct the model with stream=False for this server",
                )
                async for chunk in stream:
                    draft.add_chunk(chunk)
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._not_json("sent a stream event", exc) from exc
        if draft.finish_reason is None:
            raise self._unfinished("finish_reason")
        return draft

    async def _whole(
        self,
        wire_messages: list[ChatCompletionMessageParam],
        wire_tools: list[ChatCompletionFunctionToolParam],
        response_format: dict[str, Any] | None,
    ) -> _Draft:
        try:
            completion = await self._client.chat.completions.create(
                **self._options(wire_messages, wire_tools, response_format), stream=False
            )
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._not_json("answered with a body", exc) from exc
        draft = _Draft.from_completion(completion)
        if draft.finish_reason is None:
            raise ModelError(
                f"{self._label} answered without a finished choice (no finish_reason)",
                retryable=False,
            )
        return draft

    def _options(
        self,
        wire_messages: list[ChatCompletionMessageParam],
        wire_tools: list[ChatCompletionFunctionToolParam],
        response_format: dict[str, Any] | None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self.model, "messages": wire_messages}
        if wire_tools:
            options["tools"] = wire_tools
        if response_format is not None:
            options["response_format"] = response_format
        if self.max_tokens is not None:
            options[self.max_tokens_field] = self.max_tokens
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.extra_body:
            options["extra_body"] = self.extra_body
        headers = trace_headers()
        if headers:
            options["extra_headers"] = headers
        return options

    def _api_error(self, exc: Exception) -> ModelError | None:
        if isinstance(exc, openai.APIStatusError):
            return error_from_status(
                self._label,
                exc.status_code,
                exc.response.headers,
                error_detail(exc.body, exc.message),
            )
        if isinstance(exc, openai.APIError):
            # An error event inside a 200 stream: only its type or code tells what it was.
            kinds = {exc.type, exc.code} & RETRYABLE_ERROR_TYPES
            detail = error_detail(exc.body, exc.message)
            return ModelError(
                f"{self._label} reported an error mid-stream: {detail}", retryable=bool(kinds)
            )
        return None


@dataclass
class _CallDraft:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Draft:
    """The first choice of a completion as it arrives, before it is checked and becomes a turn."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _CallDraft] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    def add_chunk(self, chunk: ChatCompletionChunk) -> None:
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    text_delta(delta.content)  # to whoever follows the run, live only
                if delta.refusal:
                    self.refusal.append(delta.refusal)
                for piece in delta.tool_calls or ():
                    # A server that omits the index sends whole calls, one per delta.
                    index = piece.index if isinstance(piece.index, int) else len(self.calls)
                    call = self.calls.setdefault(index, _CallDraft())
                    if piece.id and call.id is None:
                        call.id = piece.id
                    function = piece.function
                    if function is not None:
                        # Some servers repeat the name in every delta; OpenAI never splits it.
                        if function.name and function.name != call.name:
                            call.name += function.name
                        if function.arguments:
                            call.arguments.append(function.arguments)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    @classmethod
    def from_completion(cls, completion: ChatCompletion) -> _Draft:
        draft = cls()
        if completion.usage is not None:
            draft.usage = _usage(completion.usage)
        choice = next((c for c in completion.choices or () if c.index == 0), None)
        if choice is None:
            return draft
        message = choice.message
        if message.content:
            draft.text.append(message.content)
        if message.refusal:
            draft.refusal.append(message.refusal)
        for index, call in enumerate(message.tool_calls or ()):
            if call.type != "function":
                raise ModelError(
                    f"the model made a {call.type!r} tool call; bide offers function tools only",
                    retryable=False,
                )
            draft.calls[index] = _CallDraft(
                call.id, call.function.name or "", [call.function.arguments or ""]
            )
        finish: object = choice.finish_reason
        draft.finish_reason = finish if isinstance(finish, str) and finish else None
        return draft

    def to_turn(self, names: ToolNames, ids: CallIds, label: str) -> AssistantTurn:
        calls = []
        for index in sorted(self.calls):
            draft = self.calls[index]
            if not draft.name:
                raise ModelError(f"{label}: the model made a tool call without a name")
            arguments = parse_arguments(
                "".join(draft.arguments),
                provider=label,
                tool=draft.name,
                finish_reason=self.finish_reason,
            )
            calls.append(ToolCall(ids.assign(draft.id), names.from_wire(draft.name), arguments))
        text = "".join(self.text) or "".join(self.refusal) or None
        return AssistantTurn(
            text=text,
            tool_calls=tuple(calls),
            usage=self.usage,
            finish_reason=self.finish_reason or "stop",
        )


def _response_format(output: OutputSpec) -> dict[str, Any]:
    """A typed answer asked for as JSON text that follows the output's schema. Not ``strict``:
    strict mode accepts a subset of JSON Schema only, and bide validates the answer itself."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": output.name,
            "description": output.description,
            "schema": json_schema(output.schema),
            "strict": False,
        },
    }


def _usage(usage: CompletionUsage) -> Usage:
    # Some compatible servers (OpenRouter, LiteLLM's proxy) report what the turn cost.
    extra = usage.model_extra or {}
    cost = extra.get("cost")
    if not isinstance(cost, int | float) or isinstance(cost, bool) or not cost >= 0:
        cost = None
    return Usage(
        usage.prompt_tokens or 0,
        usage.completion_tokens or 0,
        None if cost is None else float(cost),
    )


def _encode_tool(spec: ToolSpec, names: ToolNames) -> ChatCompletionFunctionToolParam:
    function = tool_entry(spec, names, "parameters")
    return {"type": "function", "function": function}  # type: ignore[typeddict-item]


def _encode_messages(
    system_prompt: str | None, messages: Sequence[Message], names: ToolNames
) -> list[ChatCompletionMessageParam]:
    out: list[ChatCompletionMessageParam] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantTurn):
            out.append(_encode_assistant(message, names))
        elif isinstance(message, ToolResultMessage):
            text = result_text(message)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.call_id,
                    # Chat Completions has no error flag; the text itself must say it.
                    "content": f"Error: {text}" if message.is_error else text,
                }
            )
        else:
            raise ProtocolError(f"not a conversation message: {message!r}")
    return out


def _encode_assistant(turn: AssistantTurn, names: ToolNames) -> ChatCompletionAssistantMessageParam:
    encoded: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    if turn.tool_calls:
        encoded["content"] = turn.text
        encoded["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": names.to_wire(call.name), "arguments": arguments_json(call)},
            }
            for call in turn.tool_calls
        ]
    else:
        encoded["content"] = turn.text or ""
    return encoded
