"""``tools``: list a server's tools in full, refuse a malformed list, and wrap each as a bide Tool.

The list is untrusted input: one bad entry refuses the whole list, so that nothing a model sees
comes from a server that broke the protocol. Listing is bounded as a whole (the wire, the number
of tools, each schema's size, and the checks, which run in a worker thread so that a large list
never blocks the event loop).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
from collections.abc import Mapping
from typing import Final

from mcp import Client, ClientSession

from adapters.mcp.keys import key_argument_map, model_facing_schema
from adapters.mcp.reconcile import lookup_reconciler
from adapters.mcp.session import Session, adopt, parts_of
from adapters.mcp.tool import DEFAULT_MAX_RESULT_BYTES, MCPTool
from adapters.mcp.vetting import MAX_LIST_PAGES, Limits, list_all, prepare
from runtime.approval import ApprovalPolicy
from runtime.errors import ConfigError, ProtocolError
from runtime.reconcile import Reconciler
from runtime.tools import Safety, Tool, safe_repr

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_LIST_TIMEOUT",
    "DEFAULT_MAX_DESCRIPTION_BYTES",
    "DEFAULT_MAX_SCHEMA_BYTES",
    "DEFAULT_MAX_TOOLS",
    "MAX_LIST_PAGES",
    "tools",
]

DEFAULT_CALL_TIMEOUT: Final = 300.0
"""Seconds one tool call may take unless ``tools`` is told otherwise: five minutes.

Long enough for a tool that searches, builds or waits on a person's elicitation answer; a call
still running after that has an unknown outcome (a side effect halts) instead of holding the
run for ever. A tool call without a timeout needs ``call_timeout=None``, said explicitly.
"""

DEFAULT_LIST_TIMEOUT: Final = 30.0
"""Seconds ``tools`` may take for the whole tool list unless told otherwise: every page on the
wire, reading it and checking every tool."""

DEFAULT_MAX_DESCRIPTION_BYTES: Final = 8 << 10
"""The longest tool description, in UTF-8 bytes, ``tools`` accepts unless told otherwise: 8 KiB.

A description goes to the model with every request, for every tool, so its size is paid on
every turn, and a long one is room for instructions aimed at the model. 8 KiB (about 2,000
tokens) leaves room for a detailed one.
"""

DEFAULT_MAX_TOOLS: Final = 1000
"""The most tools ``tools`` accepts from one server unless told otherwise: 1,000.

Every tool's name, description and schema go to the model with every request; model APIs take a
few hundred tools at most (OpenAI's takes 128), so a server listing more is either broken or
hostile, and checking each costs time.
"""

DEFAULT_MAX_SCHEMA_BYTES: Final = 64 << 10
"""The largest input or output schema of one tool, in bytes of compact JSON, ``tools`` accepts
unless told otherwise: 64 KiB.

A schema goes to the model with every request, like the description; 64 KiB (about 16,000
tokens) is many times a detailed schema, while checking a schema of megabytes takes seconds.
"""


async def tools(
    session: Session | ClientSession | Client,
    *,
    trust_annotations: bool = False,
    safety: Mapping[str, Safety] | None = None,
    approval: Mapping[str, ApprovalPolicy] | None = None,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    list_timeout: float | None = DEFAULT_LIST_TIMEOUT,
    max_description_bytes: int = DEFAULT_MAX_DESCRIPTION_BYTES,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    max_tools: int = DEFAULT_MAX_TOOLS,
    max_schema_bytes: int = DEFAULT_MAX_SCHEMA_BYTES,
    durable_elicitation: bool = False,
    reconcile: Mapping[str, str | Reconciler] | None = None,
    settle: Mapping[str, float] | None = None,
    idempotency_argument: Mapping[str, str] | None = None,
) -> list[Tool]:
    """List every tool of a connected MCP session and wrap each one as a bide ``Tool``.

    ``session`` is what ``connect`` yields, or an ``mcp.ClientSession`` / ``mcp.Client`` the
    caller already holds (its own callbacks then answer elicitation). The tools call back through
    it, so keep it open while they are used.

    Every tool is a ``SIDE_EFFECT`` unless ``trust_annotations`` maps the server's hints
    (``readOnlyHint`` to ``READ_ONLY``, else ``idempotentHint`` to ``IDEMPOTENT``); an entry in
    ``safety`` wins over both. ``approval`` gates a tool on a policy (it becomes
    ``ToolSpec.approval``). A name in ``safety`` or ``approval`` that the server does not list is
    a ``ConfigError``, so a typo never leaves the real tool ungated. ``call_timeout`` seconds
    bound each call (``DEFAULT_CALL_TIMEOUT``; ``None``, or zero or less: none, when the host
    says so). ``list_timeout`` bounds the whole listing: every page, reading it and checking
    every tool (``DEFAULT_LIST_TIMEOUT``; ``None``: none); the checks run in a worker thread, so
    the event loop stays free meanwhile. ``max_tools`` (``DEFAULT_MAX_TOOLS``),
    ``max_schema_bytes`` (``DEFAULT_MAX_SCHEMA_BYTES``, each input or output schema),
    ``max_description_bytes`` and ``max_result_bytes`` bound what a server may send (zero or
    less: no limit).

    With ``durable_elicitation``, a form elicitation during a READ_ONLY or IDEMPOTENT call made by
    an agent run is journaled: a recorded answer is given from the journal, and with none the
    run pauses (``waiting``) until one is given (``answer``), then the call runs again. Calls
    that could repeat an effect (SIDE_EFFECT) are answered live by ``connect``'s resolver, or
    declined. See ``docs/mcp.md``.

    ``reconcile`` pairs a SIDE_EFFECT tool with a lookup tool of the same server that settles
    its halts (``{"charge": "find_charge"}``, see ``adapters.mcp.reconcile``), or with a
    reconciler function of the host's. ``settle`` declares, per reconciled side effect, the
    seconds its server may take to apply a request after it left (``{"charge": 30}``): only then
    may a lookup's *absent* settle a halt as not executed (``runtime.reconcile``). A server's tool
    inherits none: without it, *absent* leaves the halt for a person.

    ``idempotency_argument`` names, per tool, the argument in which its server takes an
    idempotency key (``{"charge": "idempotency_key"}``): bide writes the call's own key there,
    the same on every attempt, replacing whatever the model put there, and tells the model it
    need not give one. Never guessed from names: only a tool named here gets it. The argument
    must be a property of the tool's input schema that accepts a string (a ``ConfigError``
    otherwise). See ``docs/mcp.md``.

    Raises ``ProtocolError`` if the server's list breaks the protocol (see ``docs/mcp.md``).
    """
    held = parts_of(_session(session))
    safety_of = _safety_map(safety)
    approval_of = _approval_map(approval)
    timeout = _timeout(call_timeout, "call_timeout")
    listing_bound = _timeout(list_timeout, "list_timeout")
    description_limit = _byte_limit(max_description_bytes, "max_description_bytes")
    result_limit = _byte_limit(max_result_bytes, "max_result_bytes")
    limits = Limits(
        call_timeout=timeout,
        tools=_count_limit(max_tools, "max_tools"),
        schema_bytes=_byte_limit(max_schema_bytes, "max_schema_bytes"),
        description_bytes=description_limit,
    )
    if not isinstance(trust_annotations, bool):
        raise ConfigError("trust_annotations must be True or False")
    if not isinstance(durable_elicitation, bool):
        raise ConfigError("durable_elicitation must be True or False")
    if not isinstance(reconcile, Mapping | None):
        raise ConfigError("reconcile maps a tool's name to a lookup tool's name or a function")
    pairs = dict(reconcile or {})
    settles = _settle_map(settle)
    key_arguments = key_argument_map(idempotency_argument)

    server = held.link.name
    stop = threading.Event()
    try:
        async with asyncio.timeout(listing_bound):
            listed = await list_all(held.link, server, limits.tools)
            # The checks cost milliseconds a tool (and seconds for a schema of megabytes): in a
            # worker, under the same bound, told to stop when the bound passes.
            prepared = await asyncio.to_thread(
                prepare, listed, server, limits, stop, safety_of, approval_of, trust_annotations
            )
    except TimeoutError:
        raise ProtocolError(
            f"MCP server {server!r} did not list its tools within {listing_bound:g} s "
            "(list_timeout bounds the wire, reading and checking every tool)"
        ) from None
    finally:
        stop.set()
    seen = {spec.name for spec, _ in prepared}
    named = (("safety", safety_of), ("approval", approval_of), ("reconcile", pairs))
    for option, names in (*named, ("settle", settles), ("idempotency_argument", key_arguments)):
        for name in names:
            if name not in seen:
                raise ConfigError(
                    f"{option} names {safe_repr(name)}, but the MCP server lists no tool of that "
                    "name; a misspelt name would leave the real tool ungated"
                )

    wrapped: list[Tool] = []
    for spec, validator in prepared:
        if spec.name in pairs and spec.safety is not Safety.SIDE_EFFECT:
            raise ConfigError(
                f"reconcile names {spec.name}, which is {spec.safety.value}: only a SIDE_EFFECT "
                "halts, so only one takes a reconciler"
            )
        if spec.name in settles:
            if spec.name not in pairs:
                raise ConfigError(
                    f"settle names {spec.name}, which has no reconciler (reconcile=): a settle "
                    "time only tells when a reconciler's absent may settle a halt"
                )
            spec = dataclasses.replace(spec, settle=settles[spec.name])
        key_argument = key_arguments.get(spec.name)
        if key_argument is not None:
            spec = dataclasses.replace(
                spec, input_schema=model_facing_schema(spec, key_argument, server)
            )
        wrapped.append(
            MCPTool(
                held,
                spec,
                validator,
                max_result_bytes=result_limit,
                durable_elicitation=durable_elicitation,
                key_argument=key_argument,
            )
        )
    return _paired(wrapped, pairs) if pairs else wrapped


def _settle_map(settle: Mapping[str, float] | None) -> dict[str, float]:
    if not isinstance(settle, Mapping | None):
        raise ConfigError("settle maps a side effect's name to seconds")
    found: dict[str, float] = {}
    for name, seconds in (settle or {}).items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise ConfigError(
                f"settle[{safe_repr(name)}] must be a number of seconds, zero or more, not "
                f"{safe_repr(seconds)}"
            )
        found[name] = float(seconds)
    return found


def _paired(wrapped: list[Tool], pairs: Mapping[str, str | Reconciler]) -> list[Tool]:
    """Give each paired side effect its reconciler (a lookup tool's, or the host's function)."""
    by_name = {t.spec.name: t for t in wrapped}
    for name, lookup in pairs.items():
        if isinstance(lookup, str):
            found = by_name.get(lookup)
            if found is None:
                raise ConfigError(
                    f"reconcile pairs {safe_repr(name)} with {safe_repr(lookup)}, but the MCP "
                    "server lists no tool of that name"
                )
            reconciler: Reconciler = lookup_reconciler(found)
        elif callable(lookup):
            reconciler = lookup
        else:
            raise ConfigError(
                f"reconcile[{safe_repr(name)}] must be a lookup tool's name or a reconciler "
                f"function, not {type(lookup).__name__}"
            )
        tool = by_name[name]
        assert isinstance(tool, MCPTool)
        tool.reconciled_by(reconciler)
    return wrapped


def _session(session: object) -> Session:
    if isinstance(session, Session):
        return session
    if isinstance(session, Client):
        try:
            return adopt(session.session)
        except RuntimeError:
            raise ConfigError(
                "the mcp.Client is not connected; use it inside `async with`"
            ) from None
    if isinstance(session, ClientSession):
        return adopt(session)
    raise ConfigError(
        "tools() needs a session from adapters.mcp.connect, an mcp.ClientSession or an "
        f"mcp.Client, not {type(session).__name__}"
    )


def _safety_map(safety: object) -> dict[str, Safety]:
    if safety is None:
        return {}
    if not isinstance(safety, Mapping):
        raise ConfigError("safety must map tool names to Safety values")
    checked: dict[str, Safety] = {}
    for name, value in safety.items():
        if not isinstance(name, str):
            raise ConfigError(f"safety: tool names are strings, not {name!r}")
        if not isinstance(value, Safety):
            raise ConfigError(f"safety for {safe_repr(name)} must be a Safety, not {value!r}")
        checked[name] = value
    return checked


def _approval_map(approval: object) -> dict[str, ApprovalPolicy]:
    if approval is None:
        return {}
    if not isinstance(approval, Mapping):
        raise ConfigError("approval must map tool names to ApprovalPolicy values")
    checked: dict[str, ApprovalPolicy] = {}
    for name, policy in approval.items():
        if not isinstance(name, str):
            raise ConfigError(f"approval: tool names are strings, not {name!r}")
        if not isinstance(policy, ApprovalPolicy):
            raise ConfigError(
                f"approval for {safe_repr(name)} must be an ApprovalPolicy, not {policy!r}"
            )
        # Rebuilt, so validated again and sharing nothing with the caller's object.
        checked[name] = ApprovalPolicy(need=policy.need, approvers=dict(policy.approvers))
    return checked


def _timeout(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{what} must be a number of seconds or None, not {value!r}")
    return float(value) if 0 < value < math.inf else None


def _count_limit(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer number of tools, not {value!r}")
    return value


def _byte_limit(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer number of bytes, not {value!r}")
    return value
