"""What both provider adapters do alike: the client's settings, the turn's deadline, the stream
check, the failures they share, and on the wire tool names, call ids, arguments and results.

No SDK is imported here; each adapter passes in its SDK's client class and error types, and turns
these plain values into its SDK's request shapes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeAlias, TypeVar

from runtime import OutputSpec
from runtime.errors import ConfigError, ModelError, ProtocolError
from runtime.jsontext import TooDeep, parse_json
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage
from runtime.redact import declare_secret
from runtime.tools import ToolSpec, safe_repr

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "SDK",
    "CallIds",
    "ProviderModel",
    "Request",
    "ToolNames",
    "arguments_json",
    "check_options",
    "json_schema",
    "missing_sdk",
    "parse_arguments",
    "resolve_api_key",
    "result_text",
    "tool_entry",
]


DEFAULT_TIMEOUT = 60.0
"""Seconds a provider may stay silent (connecting, before the first event, between events)."""

DEFAULT_TOTAL_TIMEOUT = 600.0
"""Seconds one whole model turn may take, however the server keeps the stream alive (a server
trickling keep-alives would otherwise hold a drive for ever). ``total_timeout=None`` lifts it."""


def missing_sdk(module: str, extra: str, exc: ImportError) -> ConfigError:
    """The error for an adapter whose SDK is not importable: it names the extra to install."""
    return ConfigError(
        f"{module} needs the {extra} SDK, which is not importable ({exc}): "
        f"pip install 'bide[{extra}]'"
    )


class _Client(Protocol):
    async def close(self) -> None: ...


class _Draft(Protocol):
    """A provider's answer as it arrived, not yet checked: it becomes a turn or a ModelError."""

    def to_turn(self, names: ToolNames, ids: CallIds, label: str) -> AssistantTurn: ...


ClientT = TypeVar("ClientT", bound=_Client)
Request: TypeAlias = "Callable[[], Awaitable[_Draft]]"
"""One turn's request, encoded and ready: calling it sends it."""


@dataclass(frozen=True, slots=True)
class SDK(Generic[ClientT]):
    """What ``ProviderModel`` needs of a provider's SDK (both are generated alike): its client
    class, the root of its errors, and its two transport failures."""

    client: Callable[..., ClientT]
    error: type[Exception]
    timeout_error: type[Exception]
    connection_error: type[Exception]


class ProviderModel(Generic[ClientT]):
    """What a provider model holds and does whatever its SDK: where it sends, how long it waits,
    the one deadline on a whole turn, the failures both SDKs share, and closing its client.

    A subclass checks its own options, then calls ``_connect``; it encodes a request in
    ``_prepare``, which ``complete`` sends within ``total_timeout``.
    """

    _sdk: ClassVar[SDK[Any]]
    native_output: ClassVar[bool] = False
    """Whether the provider asks for a typed answer as a JSON-schema response format (else as
    the output tool, ``OutputSpec.tool()``)."""
    model: str
    base_url: str
    timeout: float
    total_timeout: float | None
    extra_body: dict[str, Any] | None
    _label: str
    _client: ClientT

    def _connect(
        self,
        *,
        provider: str,
        label: str,
        model: str,
        api_key: str | None,
        api_key_env: str | None,
        base_url: str,
        timeout: float,
        total_timeout: float | None,
        extra_headers: Mapping[str, str] | None,
        extra_body: Mapping[str, Any] | None,
    ) -> None:
        """Resolve the key, keep the settings and build the SDK client with its retries off.

        A key that cannot be found, or a client the SDK refuses, is a ``ConfigError``.
        """
        key = resolve_api_key(api_key, api_key_env, provider=provider)
        self.model = model
        self.base_url = base_url
        self.timeout = float(timeout)
        self.total_timeout = total_timeout
        self.extra_body = dict(extra_body) if extra_body else None
        self._label = f"{label} at {self.base_url}"
        try:
            self._client = self._sdk.client(
                api_key=key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,  # retries are bide's: visible, and under one backoff policy
                default_headers=dict(extra_headers) if extra_headers else None,
            )
        except (self._sdk.error, ValueError, TypeError) as exc:
            raise ConfigError(f"{provider}: {exc}") from exc

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: OutputSpec | None = None,
    ) -> AssistantTurn:
        """The model's next turn (the ``Model`` protocol); a failure is a ``ModelError``.

        The whole turn is bounded by ``total_timeout``: past it, a retryable ``ModelError``. A
        ``TimeoutError`` from inside the request is the request's own and propagates as it is.
        ``output`` (an agent's typed answer) is asked for as the provider does best: a
        JSON-schema response format where it has one (``native_output``), else the output
        tool among the tools.
        """
        if output is not None and not self.native_output:
            tools, output = (*tools, output.tool()), None
        names = ToolNames(tools)
        request = self._prepare(system_prompt, messages, names, output)
        deadline = asyncio.timeout(self.total_timeout)
        try:
            async with deadline:
                draft = await request()
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise ModelError(
                f"{self._label}: the turn did not finish within total_timeout="
                f"{self.total_timeout}s",
                retryable=True,
            ) from exc
        return draft.to_turn(names, CallIds(messages), self._label)

    def _prepare(
        self,
        prompt: str | None,
        turns: Sequence[Message],
        names: ToolNames,
        output: OutputSpec | None,
    ) -> Request:
        """The request for one turn, encoded now and sent when called; ``output`` only for a
        provider with ``native_output``."""
        raise NotImplementedError

    def _require_event_stream(self, headers: Mapping[str, str], hint: str = "") -> None:
        """Refuse a streamed request's answer that is not ``text/event-stream``; not retryable."""
        content_type = headers.get("content-type", "")
        if not content_type.startswith("text/event-stream"):
            raise ModelError(
                f"{self._label} answered a streamed request with {content_type!r}, not "
                f"an event stream{hint}",
                retryable=False,
            )

    def _error(self, exc: Exception) -> ModelError:
        """An SDK's failure as a ``ModelError``: the transport failures both SDKs share here,
        the provider's own through ``_api_error``, anything else not retryable."""
        if isinstance(exc, self._sdk.timeout_error):
            return self._stayed_silent()
        if isinstance(exc, self._sdk.connection_error):
            return self._connection_failed(exc.__cause__, getattr(exc, "message", str(exc)))
        known = self._api_error(exc)
        return known if known is not None else ModelError(f"{self._label}: {exc}")

    def _api_error(self, exc: Exception) -> ModelError | None:
        """The provider's API errors (an HTTP status, an error event) as ``ModelError``."""
        raise NotImplementedError

    def _stayed_silent(self) -> ModelError:
        """The server said nothing for longer than ``timeout``: retryable."""
        return ModelError(
            f"{self._label} stayed silent for longer than timeout={self.timeout}s", retryable=True
        )

    def _connection_failed(self, cause: BaseException | None, fallback: str = "") -> ModelError:
        """Connecting failed, or the connection broke (``cause``, else ``fallback``, says how)."""
        why = f"{type(cause).__name__}: {cause}" if cause is not None else fallback
        return ModelError(f"{self._label}: connection failed ({why})", retryable=True)

    def _not_json(self, what: str, exc: json.JSONDecodeError) -> ModelError:
        """The server sent ``what`` (a stream event, a body) that is not JSON: retryable."""
        return ModelError(f"{self._label} {what} that is not JSON: {exc.msg}", retryable=True)

    def _unfinished(self, marker: str) -> ModelError:
        """The stream ended cleanly but before ``marker`` said the turn was done: retryable."""
        return ModelError(
            f"{self._label}: the stream ended before the model finished its turn (no {marker})",
            retryable=True,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections this model holds."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"


_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]")


def wire_name(name: str) -> str:
    """The name a provider accepts for a tool: ``[A-Za-z0-9_-]{1,64}``.

    bide's names (the MCP grammar) may hold dots and run to 128 characters; those are rewritten
    with a digest of the full name, so the rewrite is the same in every process and every turn.
    """
    if _WIRE_NAME.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{_NOT_WIRE.sub('_', name)[:55]}_{digest}"


class ToolNames:
    """The two-way map between bide tool names and the names a provider sees, for one request."""

    def __init__(self, tools: Sequence[ToolSpec]):
        self.specs = tuple(tools)
        """The tools offered, in the order given."""
        self._to_wire: dict[str, str] = {}
        self._from_wire: dict[str, str] = {}
        for spec in tools:
            wire = wire_name(spec.name)
            other = self._from_wire.get(wire)
            if other is not None and other != spec.name:
                raise ConfigError(
                    f"tools {other!r} and {spec.name!r} would reach the model under one name "
                    f"{wire!r}; rename one of them"
                )
            self._to_wire[spec.name] = wire
            self._from_wire[wire] = spec.name

    def to_wire(self, name: str) -> str:
        return self._to_wire.get(name) or wire_name(name)

    def from_wire(self, wire: str) -> str:
        """The bide name of a name the model used; an unknown one is kept (the loop refuses it)."""
        return self._from_wire.get(wire, wire)


class CallIds:
    """Hands out the ids of one turn's tool calls: the provider's, unless missing or already used.

    The journal keys results by call id within a run, so an id must be unique across the whole
    conversation. Some OpenAI-compatible servers send none, or count from ``call_0`` every turn;
    those calls get a fresh random id, which the recorded turn keeps from then on.
    """

    def __init__(self, history: Iterable[Message]):
        self._used = {
            call.id for m in history if isinstance(m, AssistantTurn) for call in m.tool_calls
        }

    def assign(self, provider_id: str | None) -> str:
        if (
            provider_id
            and len(provider_id) <= 256
            and provider_id.isprintable()
            and provider_id not in self._used
        ):
            chosen = provider_id
        else:
            chosen = f"call_{secrets.token_hex(12)}"
        self._used.add(chosen)
        return chosen


def parse_arguments(raw: str, *, provider: str, tool: str, finish_reason: str | None) -> Any:
    """A tool call's arguments, from the JSON text the model wrote; they must form an object.

    Anything else is the model breaking the tool protocol: a ``ModelError`` that is not retryable
    (the same request at the same temperature tends to fail the same way). An empty text is the
    empty object, as several servers send for a tool without parameters.
    """
    if not raw.strip():
        return {}
    hint = " (the turn hit max_tokens; raise it)" if finish_reason == "length" else ""
    try:
        value = parse_json(raw, parse_constant=_reject_constant)
    except TooDeep as exc:
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} {exc}: {safe_repr(raw, 80)}",
            retryable=False,
        ) from None
    except ValueError as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} that are not valid JSON{hint}: "
            f"{why} in {safe_repr(raw, 80)}",
            retryable=False,
        ) from exc
    if not isinstance(value, dict):
        raise ModelError(
            f"{provider}: the model wrote arguments for {tool!r} that are not a JSON object: "
            f"{safe_repr(raw, 80)}",
            retryable=False,
        )
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def arguments_json(call: ToolCall) -> str:
    """A recorded call's arguments as the JSON text the model once wrote (re-encoded)."""
    try:
        return json.dumps(call.arguments, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"the arguments of call {call.id} ({call.name}) are not JSON: {exc}",
            call_id=call.id,
        ) from exc


def result_text(message: ToolResultMessage) -> str:
    """A tool result as the text the model reads: strings as they are, other values as JSON."""
    content = message.content
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"the result of call {message.call_id} ({message.name}) is not JSON: {exc}",
            call_id=message.call_id,
        ) from exc


def json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A plain, JSON-serialisable copy of a tool's input schema (it may hold read-only mappings)."""
    copied = _plain(schema)
    assert isinstance(copied, dict)
    return copied


def tool_entry(spec: ToolSpec, names: ToolNames, schema_field: str) -> dict[str, Any]:
    """A tool as a provider lists it: its wire name, its input schema under ``schema_field``,
    and its description if it has one."""
    entry: dict[str, Any] = {
        "name": names.to_wire(spec.name),
        schema_field: json_schema(spec.input_schema),
    }
    if spec.description:
        entry["description"] = spec.description
    return entry


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def resolve_api_key(api_key: str | None, api_key_env: str | None, *, provider: str) -> str:
    """The key passed in, else the one in ``api_key_env``; else a ``ConfigError`` naming both.

    The key is declared secret: a provider that echoes it in an error body, or a URL that
    carries it, never puts it in the journal, ``show`` or a log line.
    """
    if api_key is not None:
        if not api_key:
            raise ConfigError(f"{provider}: api_key is empty")
        declare_secret(api_key)
        return api_key
    if api_key_env:
        found = os.environ.get(api_key_env)
        if found:
            declare_secret(found)
            return found
    where = f"set {api_key_env} or pass api_key=" if api_key_env else "pass api_key="
    raise ConfigError(f"{provider} needs an API key: {where}")


def check_options(
    provider: str,
    *,
    model: object,
    timeout: object,
    total_timeout: object,
    max_tokens: object,
    temperature: object,
    max_tokens_required: bool = False,
) -> None:
    """Refuse options a provider would reject only at the first request, with a ``ConfigError``."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{provider}: model must be a non-empty model name")
    if not _positive(timeout):
        raise ConfigError(f"{provider}: timeout must be positive seconds")
    if total_timeout is not None and not _positive(total_timeout):
        raise ConfigError(f"{provider}: total_timeout must be positive seconds or None")
    if max_tokens is None:
        if max_tokens_required:
            raise ConfigError(f"{provider}: max_tokens is required")
    elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"{provider}: max_tokens must be a positive integer")
    if temperature is not None and not (
        isinstance(temperature, int | float)
        and not isinstance(temperature, bool)
        and 0 <= temperature < float("inf")
    ):
        raise ConfigError(f"{provider}: temperature must be a non-negative number or None")


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
    )
