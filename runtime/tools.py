"""Tools: the Safety of a call, the ToolSpec describing a tool, the ToolContext a call gets, and
the Tool protocol (``@tool`` makes one from an async function: ``runtime.functions``).

The Safety a tool declares decides what a resume may do with a call whose result was never
journaled; see ``docs/guarantee.md``. Everything in ``__all__`` is public, including what a tool
adapter (``adapters.mcp``) builds on: ``validate_tool_name``, ``safe_repr``, ``Interrupted``,
``enforces_timeout`` and the handle seam (``ToolContext.record_handle``, ``resumer``,
``handle_canceller``).
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import inspect
import re
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runtime.errors import ConfigError

__all__ = [
    "KEY_SCHEME",
    "Interrupted",
    "Safety",
    "Tool",
    "ToolContext",
    "ToolSpec",
    "enforces_timeout",
    "handle_canceller",
    "idempotency_key_for",
    "resumer",
    "safe_repr",
    "validate_tool_name",
]

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


class Safety(enum.StrEnum):
    """What re-running a tool call after a crash would do.

    ``SIDE_EFFECT`` is the default everywhere: a call that may have acted and whose result was
    never journaled halts the run instead of running again.
    """

    READ_ONLY = "read_only"
    """No effect on the world; always safe to run again."""
    IDEMPOTENT = "idempotent"
    """An effect that is safe to repeat with the same idempotency key."""
    SIDE_EFFECT = "side_effect"
    """Anything else: runs at most once."""

    @property
    def retry_safe(self) -> bool:
        return self is not Safety.SIDE_EFFECT


def validate_tool_name(name: object) -> str:
    """Return ``name`` if it follows the MCP grammar (1 to 128 of ``A-Z a-z 0-9 _ - .``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"invalid tool name {safe_repr(name)}: a tool name is 1 to 128 of A-Z a-z 0-9 _ - ."
        )
    return name


def safe_repr(value: object, limit: int = 64) -> str:
    """Quote untrusted text for an error message: printable ASCII only, bounded length.

    For anything a peer chose (a tool name, a server's message, a model's arguments): control
    characters and non-ASCII are escaped, and past ``limit`` characters the text is cut and its
    full length said, so no peer can flood or drive a terminal through an error.
    """
    text = value if isinstance(value, str) else repr(value)
    clipped = text[:limit]
    quoted = clipped.encode("ascii", "backslashreplace").decode("ascii")
    # backslashreplace keeps ASCII control characters raw; escape them too.
    quoted = "".join(c if 0x20 <= ord(c) < 0x7F else f"\\x{ord(c):02x}" for c in quoted)
    suffix = f"... ({len(text)} chars)" if len(text) > limit else ""
    return f'"{quoted}"{suffix}'


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model and the runtime know about a tool. Immutable once built."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    safety: Safety = Safety.SIDE_EFFECT
    approval: Any = None
    """An approval policy that gates every call before it runs (``None``: no gate)."""
    timeout: float | None = None
    """Seconds a call may take; past it the outcome is unknown (a side effect halts)."""
    reconcile: Any = None
    """A SIDE_EFFECT's reconciler (``runtime.reconcile``): an async function that looks the
    effect of a halted attempt up and says Found, Absent or Unknown. It settles halts."""
    settle: float | None = None
    """Seconds the provider may take to apply a request after it left: a reconciler's *absent*
    settles an attempt as not executed only this long after the end of the lease it was sent
    under (``runtime.reconcile``). None (the default, whatever the timeout): *absent* never
    settles it; a person does."""

    def __post_init__(self) -> None:
        validate_tool_name(self.name)
        if not isinstance(self.safety, Safety):
            raise ConfigError(f"tool {self.name}: safety must be a Safety, not {self.safety!r}")
        if self.timeout is not None and not (
            isinstance(self.timeout, int | float) and self.timeout > 0
        ):
            raise ConfigError(f"tool {self.name}: timeout must be positive seconds or None")
        if not _is_object_schema(self.input_schema):
            raise ConfigError(f"tool {self.name}: input_schema must be a JSON object schema")
        if self.reconcile is not None:
            call = type(self.reconcile).__call__ if callable(self.reconcile) else None
            if not inspect.iscoroutinefunction(self.reconcile) and not (
                call is not None and inspect.iscoroutinefunction(call)
            ):
                raise ConfigError(
                    f"tool {self.name}: reconcile must be an async function taking an Attempt"
                )
            if self.safety is not Safety.SIDE_EFFECT:
                raise ConfigError(
                    f"tool {self.name}: only a SIDE_EFFECT halts, so only one takes a reconciler"
                )
        if self.settle is not None and not (
            isinstance(self.settle, int | float)
            and not isinstance(self.settle, bool)
            and self.settle >= 0
        ):
            raise ConfigError(f"tool {self.name}: settle must be seconds (0 or more) or None")
        if self.output_schema is not None and not _is_object_schema(self.output_schema):
            raise ConfigError(f"tool {self.name}: output_schema must be a JSON object schema")


def _is_object_schema(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "object"


KEY_SCHEME = 2
"""How this bide derives idempotency keys; a run journals the scheme it started with."""

_KEY_TAG = b"bide/idempotency/v2"


def idempotency_key_for(run_id: str, call_id: str, *, scheme: int = KEY_SCHEME) -> str:
    """The stable idempotency key of one tool call: the same on every attempt and every resume.

    Scheme 2 hashes each part with its length before it, so no two (run id, call id) pairs
    share a key. Scheme 1 (runs started by bide 0.1, whose start record names no scheme) joined
    them with a NUL, which let ``("a\\0c", "1")`` and ``("a", "c\\01")`` collide; it is kept
    only so that those runs keep the keys their providers already saw.
    """
    if scheme == 1:
        material = f"{run_id}\x00{call_id}".encode()
    elif scheme == 2:
        parts = (_KEY_TAG, run_id.encode(), call_id.encode())
        material = b"".join(struct.pack(">I", len(part)) + part for part in parts)
    else:
        raise ConfigError(f"unknown idempotency key scheme {scheme!r} (this bide knows 1 and 2)")
    return f"bide-{hashlib.sha256(material).hexdigest()[:32]}"


class Interrupted(BaseException):
    """Raised by ``ToolContext.interrupt`` when the question has no journaled answer yet.

    The run pauses (``waiting``) and the tool runs again once the answer is journaled. A
    BaseException, like ``CancelledError``, so that a tool's ``except Exception`` cannot swallow
    it: let it propagate. An adapter that meets it where it cannot propagate (an SDK callback)
    keeps it and raises it from ``call``. ``waiting`` is what the run waits on.
    """

    def __init__(self, waiting: Any):
        super().__init__(getattr(waiting, "key", None))
        self.waiting = waiting


class ToolContext:
    """What a running tool may know about its call. Passed to tools that ask for it."""

    __slots__ = (
        "_interrupt",
        "_record_handle",
        "_waiter",
        "call_id",
        "idempotency_key",
        "run_id",
        "safety",
        "tool_name",
    )

    def __init__(
        self,
        *,
        run_id: str,
        call_id: str,
        tool_name: str,
        safety: Safety = Safety.SIDE_EFFECT,
        idempotency_key: str | None = None,
        interrupt: Callable[..., Awaitable[Any]] | None = None,
        record_handle: Callable[..., Awaitable[bool]] | None = None,
        waiter: Any = None,
    ):
        self.run_id = run_id
        self.call_id = call_id
        self.tool_name = tool_name
        self.safety = safety
        self.idempotency_key = idempotency_key or idempotency_key_for(run_id, call_id)
        self._interrupt = interrupt
        self._record_handle = record_handle
        self._waiter = waiter

    async def record_handle(self, handle: Any, *, in_flight: bool = False) -> bool:
        """Journal ``handle`` (plain JSON) as the next step of this attempt's progress.

        For a SIDE_EFFECT driven by an agent run the record is committed before this returns.
        A plain handle is the way to find or continue the effect (an MCP server's task id, an
        input round's request state): from then on the attempt is not an unknown outcome, and
        after a crash a resume gives the latest handle to the tool's ``resume`` (``resumer``)
        instead of halting; the tool may then also ``interrupt`` (it is continued, not re-run,
        once answered). Call it the moment the handle is known, before waiting on it.
        ``in_flight=True`` journals that a further request of the attempt is about to leave:
        until the next step the outcome is unknown again, and a resume halts. Returns False,
        journaling nothing, where no handle is needed (a retry-safe call runs again anyway) or
        none can be kept (a call made outside a run).
        """
        if self._record_handle is None:
            return False
        return await self._record_handle(handle, in_flight=in_flight)

    async def interrupt(
        self, key: str, prompt: str, *, expect: Any = str, schema: Mapping[str, Any] | None = None
    ) -> Any:
        """Pause the run until a person answers ``prompt``; return the answer on resume.

        Allowed in READ_ONLY and IDEMPOTENT tools: the tool runs again from the start once the
        answer is journaled, so everything before the interrupt must be safe to repeat. A
        SIDE_EFFECT may ask only once it has journaled a handle (``record_handle``): it is then
        continued through its ``resume``, never run again.
        """
        if self._interrupt is None:
            raise ConfigError(
                "interrupt() needs a tool driven by an agent run",
                run_id=self.run_id,
                call_id=self.call_id,
            )
        return await self._interrupt(key, prompt, expect=expect, schema=schema)

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` durably: the run stops ``waiting`` (a timer) instead of holding a
        process, and a worker drives it again once the time has come on the journal's clock.

        Like ``interrupt``, the tool then runs again from its start (so only READ_ONLY and
        IDEMPOTENT tools may wait, or a SIDE_EFFECT continued through its handle), and this
        sleep returns at once: its time came. A tool's waits are counted in order, so it must
        reach them in the same order each time it runs.
        """
        await self._waits("sleep()").sleep(seconds)

    async def sleep_until(self, when: datetime.datetime) -> None:
        """``sleep`` until ``when`` (a datetime with a time zone): the wall-clock time is read
        once, when the wait is journaled; from then on the wait is timed on the journal's
        clock, which steps of a wall clock do not move."""
        await self._waits("sleep_until()").sleep_until(when)

    async def receive(
        self,
        name: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a durable timeout, not asyncio's
        expect: Any = Any,
        schema: Mapping[str, Any] | None = None,
    ) -> Any:
        """The next signal ``name`` sent to the run (``Journal.signal``), its value validated
        as ``expect``; the run waits (``waiting``, for a signal) until one comes.

        Each signal is given to one receive, in the order they were sent; a signal sent before
        the receive waits in the run's mailbox. With ``timeout`` (seconds, from the first time
        the tool reached this receive) the receive raises ``SignalTimeout`` once it passes with
        no signal, and on every run of the tool after. Waits like ``sleep``.
        """
        return await self._waits("receive()").receive(
            name, timeout=timeout, expect=expect, schema=schema
        )

    def _waits(self, what: str) -> Any:
        if self._waiter is None:
            make = getattr(self._interrupt, "waiter", None)
            if make is not None:  # a drive's call: its waits are made the first time it waits
                self._waiter = make()
        if self._waiter is None:
            raise ConfigError(
                f"{what} needs a tool driven by an agent run",
                run_id=self.run_id,
                call_id=self.call_id,
            )
        return self._waiter

    def __repr__(self) -> str:
        return f"ToolContext(run_id={self.run_id!r}, call_id={self.call_id!r})"


@runtime_checkable
class Tool(Protocol):
    """Anything the agent can call: a spec and an async ``call`` returning a JSON value.

    One optional attribute, outside the protocol so that a tool without it still is a Tool:

    ``enforces_timeout: bool``
        True if ``call`` applies ``spec.timeout`` itself (raising ``ToolOutcomeUnknown`` past
        it) and keeps an answer that is in hand at the deadline, as an MCP tool does. The agent
        then sets no deadline of its own, which would cancel the call first and lose the
        answer. Missing, or anything but ``True``, means False: the agent bounds the call.
        Read it with ``enforces_timeout(tool)``.

    Two optional methods, for a tool that journals a handle (``ToolContext.record_handle``):

    ``async resume(handle, arguments, context) -> Any``
        Continue an attempt that journaled ``handle`` and was cut off (the process died, or it
        halted while waiting): learn its outcome without acting again, and return or raise as
        ``call`` would (``ToolOutcomeUnknown`` if the outcome still cannot be learnt: the run
        halts, and a later resume tries again). Read it with ``resumer(tool)``.
    ``async cancel_handle(handle, context) -> None``
        Ask for the effect behind ``handle`` to be stopped, when its run is cancelled. Best
        effort: a cancel proves nothing about what already happened. Read it with
        ``handle_canceller(tool)``.
    """

    @property
    def spec(self) -> ToolSpec: ...

    async def call(
        self, arguments: Mapping[str, Any], context: ToolContext | None = None
    ) -> Any: ...


def enforces_timeout(tool: object) -> bool:
    """True if ``tool`` declares that it applies its spec's timeout itself (see ``Tool``)."""
    return getattr(tool, "enforces_timeout", False) is True


def resumer(tool: object) -> Callable[..., Awaitable[Any]] | None:
    """``tool.resume`` if the tool can continue an attempt from its handle (see ``Tool``)."""
    resume = getattr(tool, "resume", None)
    return resume if callable(resume) else None


def handle_canceller(tool: object) -> Callable[..., Awaitable[Any]] | None:
    """``tool.cancel_handle`` if the tool can ask for a handle's effect to stop (``Tool``)."""
    cancel = getattr(tool, "cancel_handle", None)
    return cancel if callable(cancel) else None
