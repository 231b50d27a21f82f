"""What both provider adapters do alike: the client's settings, the turn's deadline, the stream
check and the failures they share (on the wire, tool names, call ids, arguments and results
are ``_shapes``', re-exported here).

No SDK is imported here; each adapter passes in its SDK's client class and error types, and turns
these plain values into its SDK's request shapes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeAlias, TypeVar

from adapters.models._shapes import (
    CallIds,
    ToolNames,
    arguments_json,
    check_options,
    json_schema,
    parse_arguments,
    resolve_api_key,
    result_text,
    tool_entry,
    wire_name,
)
from runtime import OutputSpec
from runtime.errors import ConfigError, ModelError
from runtime.messages import AssistantTurn, Message
from runtime.tools import ToolSpec

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
    "wire_name",
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
