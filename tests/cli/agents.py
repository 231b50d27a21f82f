"""Agent specs the CLI tests name (``tests.cli.agents:ATTR``), one per form and per failure."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from runtime import (
    Agent,
    ApprovalPolicy,
    AssistantTurn,
    Message,
    ModelError,
    RetryPolicy,
    Safety,
    ToolContext,
    ToolOutcomeUnknown,
    ToolSpec,
    UsageLimits,
    single_approval,
    tool,
)
from runtime.testing import ScriptedModel

ANSWER = {"text": "all done"}
LOOKUP_THEN_ANSWER = [
    {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"customer": "ann"}}]},
    ANSWER,
]


@tool(safety=Safety.READ_ONLY)
async def lookup(customer: str) -> dict[str, Any]:
    """Look a customer up."""
    return {"customer": customer, "plan": "pro"}


def _agent(script: list[dict[str, Any]], **kw: Any) -> Agent:
    return Agent(model=ScriptedModel(script), tools=[lookup], **kw)


# --- the forms a spec may name -----------------------------------------------------------------

agent = _agent(LOOKUP_THEN_ANSWER, name="plain")
misfit = _agent(
    [{"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"customer": 5}}]}, ANSWER],
    name="misfit",
)
"""Its model calls ``lookup`` with arguments its schema refuses."""


def sync_factory() -> Agent:
    return _agent(LOOKUP_THEN_ANSWER, name="sync-factory")


async def async_factory() -> Agent:
    return _agent(LOOKUP_THEN_ANSWER, name="async-factory")


# Records the async context manager's life: the CLI must enter it before and exit it after.
lifecycle: list[str] = []


@asynccontextmanager
async def connected() -> AsyncIterator[Agent]:
    lifecycle.append("enter")
    try:
        yield _agent(LOOKUP_THEN_ANSWER, name="connected")
    finally:
        lifecycle.append("exit")


class Holder:
    agent = _agent([ANSWER], name="nested")


# --- specs that give no Agent ------------------------------------------------------------------

not_an_agent = 42


def returns_none() -> None:
    return None


def raises() -> Agent:
    raise RuntimeError("the tool server is down")


# --- runs that end badly -----------------------------------------------------------------------


class _FailingModel:
    def __init__(self, *, retryable: bool):
        self.retryable = retryable

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        raise ModelError("503 overloaded", retryable=self.retryable, status_code=503)


model_rejects = Agent(model=_FailingModel(retryable=False), name="rejected")
model_unavailable = Agent(
    model=_FailingModel(retryable=True),
    model_retry=RetryPolicy(max_attempts=2, initial_delay=0),
    name="unavailable",
)
one_turn_budget = _agent(LOOKUP_THEN_ANSWER, max_turns=1, name="budget")


class _BuggyModel:
    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        raise ValueError("a bug in the model adapter")


model_crashes = Agent(model=_BuggyModel(), name="buggy")


# --- a side effect whose outcome is always unknown: the run halts on it --------------------------


SENT: list[tuple[str, int]] = []
"""Every charge request this process sent (the provider's side, not the journal's)."""


@tool
async def charge(customer: str, amount: int) -> dict[str, Any]:
    """Charge a customer; the connection always drops after the request left."""
    SENT.append((customer, amount))
    raise ToolOutcomeUnknown("the connection dropped after the request left")


halting = Agent(
    model=ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "charge", "arguments": {"customer": "ann", "amount": 5}}
                ]
            },
            ANSWER,
        ]
    ),
    tools=[charge],
    name="halting",
)


# --- a model that names things with terminal escape sequences ----------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m"
escapes = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": f"c1{ESCAPES}", "name": f"wipe{ESCAPES}", "arguments": {}}]},
            {"text": f"done{ESCAPES}"},
        ]
    ),
    name="escapes",
)


# --- people: approval gates and questions (tests/cli/test_people.py) -------------------------

WIRE = [
    {"tool_calls": [{"id": "c1", "name": "wire", "arguments": {"account": "acme", "amount": 500}}]},
    {"text": "wired"},
]


def _wire_tool(policy: ApprovalPolicy) -> Any:
    @tool(approval=policy)
    async def wire(account: str, amount: int) -> dict[str, Any]:
        """Wire money behind a gate."""
        return {"wired": amount, "to": account}

    return wire


gated = Agent(model=ScriptedModel(WIRE), tools=[_wire_tool(single_approval())], name="gated")


def signed_gate() -> Agent:
    """A 2-of-N gate whose approvers' public keys are the files named in $BIDE_TEST_APPROVERS
    (``alice=path,bob=path``), as `keygen` writes them."""
    approvers = {}
    for pair in os.environ["BIDE_TEST_APPROVERS"].split(","):
        name, _, path = pair.partition("=")
        with open(path) as f:
            approvers[name] = f.read().strip()
    policy = ApprovalPolicy(need=2, approvers=approvers)
    return Agent(model=ScriptedModel(WIRE), tools=[_wire_tool(policy)], name="signed")


@tool(safety=Safety.READ_ONLY)
async def quote(item: str, context: ToolContext) -> dict[str, Any]:
    """Ask a person for a price."""
    price = await context.interrupt("price", f"What should {item} cost?", expect=int)
    return {"item": item, "price": price}


asking = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "quote", "arguments": {"item": "widget"}}]},
            {"text": "quoted"},
        ]
    ),
    tools=[quote],
    name="asking",
)


# --- an MCP stdio server whose side effect hangs up (tests/adapters/mcp/test_end_to_end.py)


@asynccontextmanager
async def mcp_hangs_up() -> AsyncIterator[Agent]:
    """An agent whose SIDE_EFFECT tool is `die` on tests/adapters/mcp/stdio_server.py: the
    server records the call in $BIDE_TEST_RUNS, then exits without answering."""
    import sys

    from mcp import StdioServerParameters

    from adapters.mcp import connect, tools

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    server = StdioServerParameters(
        command=sys.executable,
        args=[os.path.join(here, "adapters", "mcp", "stdio_server.py")],
        env={"BIDE_TEST_RUNS": os.environ["BIDE_TEST_RUNS"]},
    )
    script = [
        {"tool_calls": [{"id": "c1", "name": "die", "arguments": {}}]},
        {"text": "done"},
    ]
    async with connect(server) as session:
        yield Agent(model=ScriptedModel(script), tools=await tools(session), name="mcp")


spender = Agent(
    model=ScriptedModel([{"text": "spent", "usage": {"input_tokens": 700, "output_tokens": 50}}]),
    name="spender",
)
limited = _agent(LOOKUP_THEN_ANSWER, usage_limits=UsageLimits(requests=1), name="limited")

chatty = _agent(
    [
        {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"customer": "ann"}}]},
        {"text": "ann is on pro"},
        {"tool_calls": [{"id": "c2", "name": "lookup", "arguments": {"customer": "bob"}}]},
        {"text": "bob is on pro too"},
    ],
    name="chatty",
)


@tool(safety=Safety.READ_ONLY)
async def wait_for_payment(order: str, context: ToolContext) -> dict[str, Any]:
    """Wait for the signal that an order's payment cleared."""
    cents = await context.receive("paid", expect=int)
    return {"order": order, "cents": cents}


receiving = Agent(
    model=ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "wait_for_payment", "arguments": {"order": "o7"}}
                ]
            },
            {"text": "paid"},
        ]
    ),
    tools=[wait_for_payment],
    name="receiving",
)


# --- the worker command's collector ------------------------------------------------------------

COLLECTOR_SEEN: list[tuple[int, int]] = []
"""(youngest generation's threshold, objects frozen) as ``collector``'s tool saw them."""


@tool(safety=Safety.READ_ONLY)
async def look_at_collector() -> str:
    """Note how the process's cyclic collector is set while a drive runs."""
    import gc

    COLLECTOR_SEEN.append((gc.get_threshold()[0], gc.get_freeze_count()))
    return "seen"


collector = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "look_at_collector", "arguments": {}}]},
            ANSWER,
        ]
    ),
    tools=[look_at_collector],
    name="collector",
)
