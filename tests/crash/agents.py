"""The crash suite's agents, for ``--agent tests.crash.agents:NAME`` in child processes.

Each agent plays a fixed script (``ScriptedModel``; the model is the only fake) against tools that
write every real execution to the ledger (``tests/crash/ledger.py``): natively, in the agent's own
process, or over MCP stdio, where the server process writes the ledger and may outlive the agent.

Names: ``read_only``, ``idempotent``, ``side_effect`` (every call of that Safety) and ``mixed``
(all three, with concurrent calls), each also as ``mcp_<name>``; ``typed`` (a typed answer),
``tree`` (a parent whose one tool is a child agent that charges: ``runtime.children``) and
``waits`` (tools that wait durably between charges: a sleep, a receive of a signal the harness
sends, and a receive that times out: ``runtime.waits``).
Environment of the child: ``CRASH_LEDGER`` (the ledger file), ``CRASH_SETTLE`` (set: the charge
declares a reconciler that finds it in the ledger by its idempotency key, with that settle time),
``CRASH_JITTER_MS`` and ``CRASH_JITTER_SEED`` (tools sleep a seeded random time, up to that many
ms, before and after their effect), ``CRASH_SLOW_CALL`` (``c3:400``: that call sleeps 400 ms
before its effect), ``CRASH_SERVER_LOCK`` (held by MCP servers while they live, so a test can
wait for the last one to finish), ``CRASH_HISTORY_EVERY`` (a drive keeps a history chunk every
that many turns: ``runtime.history``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pydantic

from runtime import (
    Agent,
    AssistantTurn,
    OutputSpec,
    Safety,
    SignalTimeout,
    Tool,
    ToolContext,
    ToolSpec,
    UserMessage,
    faults,
    history,
    sessions,
)
from runtime.functions import FunctionTool, tool
from runtime.messages import Message
from runtime.reconcile import Absent, Attempt, Found, Reconciler, Unknown
from runtime.testing import ScriptedModel
from tests.crash.ledger import Ledger, now_ms

ROOT = Path(__file__).resolve().parents[2]

TOOLS: dict[str, Safety] = {
    "lookup": Safety.READ_ONLY,
    "upsert": Safety.IDEMPOTENT,
    "charge": Safety.SIDE_EFFECT,
}
BY_SAFETY = {safety: name for name, safety in TOOLS.items()}
FINAL = "all done"


def _call(call_id: str, name: str, n: int) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": {"n": n}}


def _single(name: str) -> list[dict[str, Any]]:
    """Two concurrent calls, then one alone, then the final answer: every call one Safety."""
    return [
        {"tool_calls": [_call("c1", name, 1), _call("c2", name, 2)]},
        {"tool_calls": [_call("c3", name, 3)]},
        {"text": FINAL},
    ]


SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "read_only": _single("lookup"),
    "idempotent": _single("upsert"),
    "side_effect": _single("charge"),
    "mixed": [
        {"tool_calls": [_call("c1", "lookup", 1), _call("c2", "upsert", 2)]},
        {"tool_calls": [_call("c3", "charge", 3), _call("c4", "upsert", 4)]},
        {"tool_calls": [_call("c5", "charge", 5), _call("c6", "lookup", 6)]},
        {"text": FINAL},
    ],
}


TYPED_FINAL = {"customer": "ann", "cents": 1200}
"""The typed answer of the ``typed`` script (an ``Invoice``), as its end record holds it."""

# A typed-output run: a READ_ONLY and a SIDE_EFFECT call, an answer that fails validation (its
# retry is a journaled turn), then the valid answer, which the runtime settles as a call.
SCRIPTS["typed"] = [
    {"tool_calls": [_call("c1", "lookup", 1), _call("c2", "charge", 2)]},
    {"output": {"customer": "ann"}},
    {"output": TYPED_FINAL},
]


# A parent whose one tool is a child agent (``Agent.as_tool``) that charges: the parent's call
# ``c1`` drives the child run ``r/c1`` (``runtime.children``), whose charge ``k1`` is the side
# effect. The child's input names its run, so its model requests are ledgered by run as well:
# the tree script is driven as run ``r`` (the crash harness's single run).
TREE_RUN, TREE_CALL, TREE_CHILD = "r", "c1", "r/c1"
CHILD_TOOL = "biller"
CHILD_FINAL = "charged"
SCRIPTS["tree"] = [
    {
        "tool_calls": [
            {"id": TREE_CALL, "name": CHILD_TOOL, "arguments": {"input": f"run {TREE_CHILD}"}}
        ]
    },
    {"text": FINAL},
]
SCRIPTS["tree_child"] = [{"tool_calls": [_call("k1", "charge", 1)]}, {"text": CHILD_FINAL}]


# Durable waits between charges: ``nap`` sleeps (0 s: journaled, and the run goes on), then
# ``listen`` receives the signal ``GO`` (the run waits until the harness sends it), waits for one
# that never comes until its timeout, then sleeps (the run waits on a timer), then the last charge.
GO, NEVER = "go", "never"
LISTEN_TIMEOUT = 0.3
SCRIPTS["waits"] = [
    {"tool_calls": [_call("c1", "nap", 1)]},
    {"tool_calls": [_call("c2", "charge", 2)]},
    {"tool_calls": [_call("c3", "listen", 3)]},
    {"tool_calls": [_call("c4", "charge", 4)]},
    {"text": FINAL},
]


class Invoice(pydantic.BaseModel):
    customer: str
    cents: int


def final_of(script: str) -> Any:
    """What a completed run of ``script`` answers, as its end record holds it."""
    return {"typed": TYPED_FINAL, "tree_child": CHILD_FINAL}.get(script, FINAL)


def run_input(run_id: str) -> str:
    """A run's input names the run, so the model can ledger its requests by run."""
    return f"run {run_id}"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the ledger is and how the tools pause; passed to children in the environment."""

    ledger: str
    jitter_ms: float = 0.0
    seed: str = "0"
    slow: Mapping[str, float] = dataclasses.field(default_factory=dict)
    settle: float | None = None
    """Set: the charge declares ``find_charge`` as its reconciler, with this settle time."""
    history: int | None = None
    """Set: a drive keeps its settled turns in a history chunk every that many turns."""

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        slow: dict[str, float] = {}
        for part in filter(None, env.get("CRASH_SLOW_CALL", "").split(",")):
            call_id, _, ms = part.partition(":")
            slow[call_id] = float(ms)
        return cls(
            ledger=env["CRASH_LEDGER"],
            jitter_ms=float(env.get("CRASH_JITTER_MS", "0")),
            seed=env.get("CRASH_JITTER_SEED", "0"),
            slow=slow,
            settle=float(env["CRASH_SETTLE"]) if env.get("CRASH_SETTLE") else None,
            history=int(env["CRASH_HISTORY_EVERY"]) if env.get("CRASH_HISTORY_EVERY") else None,
        )

    def to_env(self) -> dict[str, str]:
        return {
            "CRASH_LEDGER": self.ledger,
            "CRASH_JITTER_MS": str(self.jitter_ms),
            "CRASH_JITTER_SEED": self.seed,
            "CRASH_SLOW_CALL": ",".join(f"{c}:{ms}" for c, ms in self.slow.items()),
            "CRASH_SETTLE": "" if self.settle is None else str(self.settle),
            "CRASH_HISTORY_EVERY": "" if self.history is None else str(self.history),
        }

    def pauses(self, run_id: str, call_id: str) -> tuple[float, float]:
        """Seconds to sleep before and after the effect: seeded, the same on every attempt."""
        rng = random.Random(f"{self.seed}/{run_id}/{call_id}")
        before = rng.uniform(0, self.jitter_ms) + self.slow.get(call_id, 0.0)
        return before / 1000, rng.uniform(0, self.jitter_ms) / 1000


async def native_effect(
    ledger: Ledger, settings: Settings, context: ToolContext, name: str, n: int
) -> dict[str, Any]:
    """A native tool's body: note the request, pause, act (committed), crash point, pause."""
    started = now_ms()
    await asyncio.to_thread(ledger.begin, context.run_id, context.call_id, name)
    before, after = settings.pauses(context.run_id, context.call_id)
    await asyncio.sleep(before)
    value = await asyncio.to_thread(
        lambda: ledger.execute(
            run_id=context.run_id,
            call_id=context.call_id,
            tool=name,
            safety=TOOLS[name].value,
            # A charge keeps its key too, as a provider would: its reconciler looks it up by it.
            key=context.idempotency_key if TOOLS[name] is not Safety.READ_ONLY else None,
            started_ms=started,
            n=n,
        )
    )
    faults.crashpoint("tool.after_effect")
    await asyncio.sleep(after)
    return value


def charge_reconciler(ledger: Ledger) -> Reconciler:
    """``find_charge``: the charge looked up in the ledger by its idempotency key, as a payment
    provider finds one. Found, it answers what the charge answered; two charges with one key
    are not this reconciler's to settle."""

    async def find_charge(attempt: Attempt) -> Found | Absent | Unknown:
        key = attempt.idempotency_key
        found = await asyncio.to_thread(ledger.by_key, key)
        if len(found) > 1:
            return Unknown(f"{len(found)} charges carry key {key}")
        if not found:
            return Absent(f"no charge in the ledger carries key {key}")
        (e,) = found
        value = {"tool": e.tool, "n": attempt.arguments.get("n"), "execution": e.id}
        return Found(value, f"ledger execution {e.id} carries key {key}")

    return find_charge


def native_tools(ledger: Ledger, settings: Settings) -> list[FunctionTool]:
    def make(name: str) -> FunctionTool:
        async def fn(n: int, context: ToolContext) -> dict[str, Any]:
            return await native_effect(ledger, settings, context, name, n)

        fn.__name__ = name
        fn.__doc__ = f"The {TOOLS[name].value} ledger tool {name}."
        if name == "charge" and settings.settle is not None:
            return tool(reconcile=charge_reconciler(ledger), settle=settings.settle)(fn)
        return tool(safety=TOOLS[name])(fn)

    return [make(name) for name in TOOLS]


class LedgerModel:
    """A ScriptedModel that writes each request to the ledger (turn memoisation is checked)."""

    def __init__(self, script: Sequence[Mapping[str, Any]], ledger: Ledger):
        self.inner = ScriptedModel(script)
        self.ledger = ledger

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: OutputSpec | None = None,
    ) -> AssistantTurn:
        # A session's message is shown the earlier ones first: its own input is the last
        # "run <id>" message, and the script counts from there.
        start = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, UserMessage) and m.text.startswith("run ")
        )
        own = messages[start:]
        n = sum(isinstance(m, AssistantTurn) for m in own) + 1
        first = own[0]
        assert isinstance(first, UserMessage)
        run_id = first.text.removeprefix("run ")
        prefix = sessions.digest(messages[:start]) if start else None
        await asyncio.to_thread(self.ledger.model_request, run_id, n, prefix)
        return await self.inner.complete(system_prompt, own, tools, output=output)


def build(script: str, tools: Sequence[Tool], ledger: Ledger) -> Agent[Any]:
    return Agent(
        name=f"crash-{script}",
        model=LedgerModel(SCRIPTS[script], ledger),
        tools=tools,
        max_turns=len(SCRIPTS[script]) + 1,
        output_type=Invoice if script == "typed" else None,
    )


def _chunks_from_env() -> None:
    """In a child the harness started: how often its drives write history chunks."""
    every = Settings.from_env().history if os.environ.get("CRASH_LEDGER") else None
    if every is not None:
        history.EVERY = every


def wait_tools(ledger: Ledger, settings: Settings) -> list[FunctionTool]:
    """``nap`` (IDEMPOTENT) and ``listen`` (READ_ONLY): they wait, then act as ``upsert`` and
    ``lookup`` do (the ledger keeps their effects under those names)."""

    @tool(safety=Safety.IDEMPOTENT)
    async def nap(n: int, context: ToolContext) -> dict[str, Any]:
        """Sleep durably, then upsert."""
        await context.sleep(0)
        return await native_effect(ledger, settings, context, "upsert", n)

    @tool(safety=Safety.READ_ONLY)
    async def listen(n: int, context: ToolContext) -> dict[str, Any]:
        """Receive the go signal, wait for one that never comes, sleep, then look up."""
        got = await context.receive(GO, expect=int)
        with contextlib.suppress(SignalTimeout):
            await context.receive(NEVER, timeout=LISTEN_TIMEOUT)
        await context.sleep(LISTEN_TIMEOUT / 2)
        return {**await native_effect(ledger, settings, context, "lookup", n), "got": got}

    return [nap, listen]


def native(script: str, settings: Settings | None = None) -> Agent:
    settings = settings or Settings.from_env()
    ledger = Ledger(settings.ledger)
    if script == "waits":
        tools = [*native_tools(ledger, settings), *wait_tools(ledger, settings)]
        return build(script, tools, ledger)
    if script == "tree":
        child = build("tree_child", native_tools(ledger, settings), ledger)
        return build(script, [child.as_tool(name=CHILD_TOOL)], ledger)
    return build(script, native_tools(ledger, settings), ledger)


class Referenced:
    """An MCP tool whose requests carry the run and call they belong to (as an order reference
    would), so that the server can ledger them; the model never sees those two arguments."""

    def __init__(self, inner: Tool):
        self.inner = inner
        schema = dict(inner.spec.input_schema)
        schema["properties"] = {
            k: v for k, v in schema.get("properties", {}).items() if k not in ("run", "call")
        }
        schema["required"] = [r for r in schema.get("required", []) if r not in ("run", "call")]
        self._spec = dataclasses.replace(inner.spec, input_schema=schema)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        assert context is not None
        sent = {**arguments, "run": context.run_id, "call": context.call_id}
        return await self.inner.call(sent, context)


def server_parameters(settings: Settings) -> Any:
    from mcp import StdioServerParameters

    env = settings.to_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    lock = os.environ.get("CRASH_SERVER_LOCK")
    if lock:
        env["CRASH_SERVER_LOCK"] = lock
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tests.crash.server"], env=env, cwd=str(ROOT)
    )


@asynccontextmanager
async def mcp(script: str, settings: Settings | None = None) -> AsyncIterator[Agent]:
    from adapters.mcp import connect, tools

    settings = settings or Settings.from_env()
    async with connect(server_parameters(settings)) as session:
        listed = await tools(session, safety=TOOLS)
        yield build(script, [Referenced(t) for t in listed], Ledger(settings.ledger))


def _native_spec(script: str) -> Callable[[], Agent]:
    def make() -> Agent:
        return native(script)

    make.__name__ = script
    return make


def _mcp_spec(script: str) -> Callable[[], AbstractAsyncContextManager[Agent]]:
    def make() -> AbstractAsyncContextManager[Agent]:
        return mcp(script)

    make.__name__ = f"mcp_{script}"
    return make


_chunks_from_env()

read_only = _native_spec("read_only")
idempotent = _native_spec("idempotent")
side_effect = _native_spec("side_effect")
mixed = _native_spec("mixed")
typed = _native_spec("typed")
tree = _native_spec("tree")
waits = _native_spec("waits")
mcp_read_only = _mcp_spec("read_only")
mcp_idempotent = _mcp_spec("idempotent")
mcp_side_effect = _mcp_spec("side_effect")
mcp_mixed = _mcp_spec("mixed")
