"""Spans of drives, model requests and tool calls, read back through the SDK's memory exporter."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime import (
    Agent,
    Journal,
    ModelError,
    Resolution,
    RetryPolicy,
    RunStatus,
    Safety,
    ToolContext,
    ToolOutcomeUnknown,
    single_approval,
    tool,
    tracing,
)
from runtime.errors import BudgetError
from runtime.messages import AssistantTurn, Message
from runtime.testing import ScriptedModel
from runtime.tools import ToolSpec
from tests.conftest import child_env


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """bide's spans go to an in-memory exporter for the test, then back to the global provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        yield exporter
    finally:
        tracing.configure()
        provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if (s.name or "").startswith(prefix)]


def events(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {e.name: dict(e.attributes or {}) for e in span.events}


def the(found: Sequence[ReadableSpan]) -> ReadableSpan:
    assert len(found) == 1, [s.name for s in found]
    return found[0]


def tool_span(exporter: InMemorySpanExporter, call_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in named(exporter, "execute_tool ")
        if (s.attributes or {}).get("gen_ai.tool.call.id") == call_id
    ]


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


@tool(safety=Safety.READ_ONLY)
async def balance(customer: str) -> int:
    """A customer's balance."""
    return 1200


@tool
async def charge(customer: str, cents: int) -> dict[str, Any]:
    """Charge a customer (a side effect)."""
    return {"charged": cents}


@tool(approval=single_approval())
async def refund(customer: str) -> str:
    """Refund a customer, once approved."""
    return "refunded"


BILLING = [
    {"tool_calls": [call("c1", "balance", customer="ann")], "usage": {"input_tokens": 10}},
    {"tool_calls": [call("c2", "charge", customer="ann", cents=500)]},
    {"tool_calls": [call("c3", "refund", customer="ann")]},
    {"text": "Charged and refunded.", "usage": {"input_tokens": 7, "output_tokens": 3}},
]


async def test_a_run_is_a_drive_span_over_chat_and_execute_tool_spans(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    """invoke_agent > chat / execute_tool, with the conventions' attributes and bide's events."""
    agent = Agent(model=ScriptedModel(BILLING), tools=[balance, charge, refund], name="billing")
    first = await agent.run("inv-1", "Charge ann", journal=journal)
    assert first.status is RunStatus.WAITING

    drive = the(named(spans, "invoke_agent"))
    assert drive.name == "invoke_agent billing"
    assert drive.parent is None
    attrs = dict(drive.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "billing"
    assert attrs["gen_ai.conversation.id"] == attrs["bide.run.id"] == "inv-1"
    assert attrs["bide.run.status"] == "waiting"
    assert attrs["bide.waiting_calls"] == ("c3",)
    assert "bide.resumed" not in attrs

    chats = named(spans, "chat")
    assert [dict(c.attributes or {})["bide.turn"] for c in chats] == [1, 2, 3]
    for c in chats:
        assert c.parent is not None and c.parent.span_id == drive.context.span_id
        assert dict(c.attributes or {})["gen_ai.operation.name"] == "chat"
        assert dict(c.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert dict(chats[0].attributes or {})["gen_ai.usage.input_tokens"] == 10

    read = the(tool_span(spans, "c1"))
    assert read.name == "execute_tool balance"
    assert read.parent is not None and read.parent.span_id == drive.context.span_id
    assert dict(read.attributes or {})["bide.tool.safety"] == "read_only"
    assert dict(read.attributes or {})["bide.tool.outcome"] == "value"
    assert "attempt_marker_written" not in events(read)

    effect = the(tool_span(spans, "c2"))
    assert dict(effect.attributes or {})["bide.tool.safety"] == "side_effect"
    assert events(effect)["attempt_marker_written"] == {"bide.attempt": 1}

    gated = the(tool_span(spans, "c3"))
    assert events(gated)["waiting"] == {"bide.waiting.kind": "approval"}
    assert "bide.tool.outcome" not in dict(gated.attributes or {})

    spans.clear()
    await journal.approve("inv-1", "c3", by="alice")
    done = await agent.resume("inv-1", journal=journal)
    assert done.status is RunStatus.COMPLETED

    second = the(named(spans, "invoke_agent"))
    assert dict(second.attributes or {})["bide.run.status"] == "completed"
    assert events(second)["resumed"] == {
        "bide.records": 9,
        "bide.turns": 3,
        "bide.calls_replayed": 2,
    }
    (link,) = second.links
    assert link.context.trace_id == drive.context.trace_id
    assert link.context.span_id == drive.context.span_id
    # Usage on the drive span is that of the requests this drive made (one turn here).
    assert dict(second.attributes or {})["gen_ai.usage.input_tokens"] == 7
    approved = the(tool_span(spans, "c3"))
    assert events(approved)["approval"] == {
        "bide.approval.outcome": "approved",
        "bide.replayed": False,
    }
    assert "attempt_marker_written" in events(approved)
    assert dict(approved.attributes or {})["bide.tool.outcome"] == "value"


async def test_the_start_record_keeps_the_first_drive_context(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    agent = Agent(model=ScriptedModel([{"text": "hi"}]))
    await agent.run("r", "go", journal=journal)
    drive = the(named(spans, "invoke_agent"))
    state = await journal.require("r")
    assert state.start is not None
    ctx = drive.context
    (traceparent,) = state.start["trace"].values()
    assert traceparent.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")


async def test_with_no_tracer_provider_nothing_is_recorded_or_journaled(journal: Journal) -> None:
    """The default (no provider anywhere): no span is current in a tool, no trace in the start."""
    seen: list[trace.SpanContext] = []

    @tool(safety=Safety.READ_ONLY)
    async def look() -> str:
        """Look at the active span."""
        seen.append(trace.get_current_span().get_span_context())
        return "ok"

    script = [{"tool_calls": [call("c1", "look")]}, {"text": "x"}]
    agent = Agent(model=ScriptedModel(script), tools=[look])
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.COMPLETED
    assert len(seen) == 1 and not seen[0].is_valid
    state = await journal.require("r")
    assert state.start is not None and "trace" not in state.start
    assert tracing.trace_headers() == {}


def test_with_nothing_traced_the_span_hooks_share_one_context_manager() -> None:
    """A drive that is not traced makes no context manager per drive, request or call."""
    hooks = [
        tracing.drive("agent", "r1"),
        tracing.drive("agent", "r2"),
        tracing.chat(None, 1, None, []),
        tracing.tool_call("c1", "look", {}, {}),
    ]
    assert all(h is hooks[0] for h in hooks)


CRASHING_CHILD = """
from runtime import faults
faults.arm_from_environment()
import asyncio, sys
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from runtime import Agent, Journal, tool, tracing
from runtime.testing import ScriptedModel

class Announce(SpanProcessor):
    # The drive never ends (it is killed): say its context the moment it starts.
    def on_start(self, span, parent_context=None):
        if span.name.startswith("invoke_agent"):
            c = span.get_span_context()
            print(f"{c.trace_id:032x} {c.span_id:016x}", flush=True)

provider = TracerProvider()
provider.add_span_processor(Announce())
tracing.configure(tracer_provider=provider)

@tool
async def charge(customer: str, cents: int) -> dict:
    return {"charged": cents}

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"customer": "a", "cents": 5}}]},
    {"text": "done"},
]

async def main():
    async with Journal(sys.argv[1]) as j:
        await Agent(model=ScriptedModel(SCRIPT), tools=[charge], name="billing").run(
            "r", "go", journal=j
        )

asyncio.run(main())
"""


async def test_a_drive_after_sigkill_links_to_the_killed_drive_and_carries_the_halt(
    spans: InMemorySpanExporter, db_path: Path
) -> None:
    """SIGKILL after the charge, before its result: the next process's drive links to the first
    drive's context (journaled at start), halts with its cause, and a resolution links to it too."""
    killed = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, str(db_path)],
        env=child_env(BIDE_CRASH="tool.after_call@1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    announced = re.search(r"^([0-9a-f]{32}) ([0-9a-f]{16})$", killed.stdout, re.MULTILINE)
    assert announced is not None, killed.stdout
    trace_hex, span_hex = announced.groups()

    script = [{"tool_calls": [call("c1", "charge", customer="a", cents=5)]}, {"text": "done"}]
    agent = Agent(model=ScriptedModel(script), tools=[charge], name="billing")
    async with Journal(db_path) as journal:
        halted = await agent.resume("r", journal=journal)
        assert halted.status is RunStatus.HALTED
        drive = the(named(spans, "invoke_agent"))
        (link,) = drive.links
        assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (
            trace_hex,
            span_hex,
        )
        assert drive.context.trace_id != link.context.trace_id  # a new trace, linked
        assert events(drive)["resumed"]["bide.records"] >= 3
        assert dict(drive.attributes or {})["bide.halted_calls"] == ("c1",)
        stuck = the(tool_span(spans, "c1"))
        halt = events(stuck)["halted"]
        assert "attempted and no result was recorded" in halt["bide.halt.cause"]
        assert "attempt_marker_written" not in events(stuck)  # the marker is the killed drive's

        spans.clear()
        assert await journal.resolve(
            "r", "c1", Resolution.succeeded({"charged": 5}), by="ledger-bot"
        )
        resolution = the(named(spans, "resolve"))
        assert resolution.name == "resolve charge"
        assert events(resolution)["resolved"] == {
            "bide.resolution.outcome": "value",
            "bide.resolution.by": "ledger-bot",
        }
        (to_first,) = resolution.links
        assert f"{to_first.context.span_id:016x}" == span_hex

        spans.clear()
        done = await agent.resume("r", journal=journal)
        assert done.status is RunStatus.COMPLETED
        last = the(named(spans, "invoke_agent"))
        assert events(last)["resumed"]["bide.calls_replayed"] == 1
        assert f"{the(last.links).context.span_id:016x}" == span_hex
        assert tool_span(spans, "c1") == []  # replayed from the journal, not run


async def test_an_outcome_unknown_halt_then_resolution_carries_the_events(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    @tool
    async def wire(amount: int) -> str:
        """Wire money; the connection drops after the request left."""
        raise ToolOutcomeUnknown("connection lost after the request was sent")

    script = [{"tool_calls": [call("w1", "wire", amount=9)]}, {"text": "wired"}]
    agent = Agent(model=ScriptedModel(script), tools=[wire])
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.HALTED
    stuck = the(tool_span(spans, "w1"))
    assert stuck.status.status_code is trace.StatusCode.ERROR
    got = events(stuck)
    assert list(got) == ["attempt_marker_written", "halted"]
    assert got["halted"]["bide.halt.cause"] == (
        "outcome unknown: connection lost after the request was sent"
    )

    spans.clear()
    assert await journal.resolve("r", "w1", Resolution.not_executed(), by="alice")
    assert events(the(named(spans, "resolve")))["resolved"] == {
        "bide.resolution.outcome": "not_executed",
        "bide.resolution.by": "alice",
    }
    # The same resolution again is a no-op, and no span says it resolved anything.
    spans.clear()
    assert not await journal.resolve("r", "w1", Resolution.not_executed(), by="alice")
    assert named(spans, "resolve") == []


async def test_retries_are_events_with_their_delays(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    failures = [ConnectionError("reset"), TimeoutError()]

    @tool(safety=Safety.READ_ONLY)
    async def fetch() -> str:
        """Fetch, failing twice."""
        if failures:
            raise failures.pop(0)
        return "ok"

    class Flaky(ScriptedModel):
        failed = False

        async def complete(
            self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
        ) -> AssistantTurn:
            if not self.failed:
                self.failed = True
                raise ModelError("overloaded", status_code=529, retryable=True)
            return await super().complete(system_prompt, messages, tools)

    quick = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.001)
    agent = Agent(
        model=Flaky([{"tool_calls": [call("f1", "fetch")]}, {"text": "ok"}]),
        tools=[fetch],
        tool_retry=quick,
        model_retry=quick,
    )
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.COMPLETED
    fetched = the(tool_span(spans, "f1"))
    retries = [dict(e.attributes or {}) for e in fetched.events if e.name == "retry"]
    assert [(r["bide.retry.attempt"], r["error.type"]) for r in retries] == [
        (1, "ConnectionError"),
        (2, "TimeoutError"),
    ]
    assert all(0 <= r["bide.retry.delay_s"] <= 0.001 for r in retries)
    first_chat = named(spans, "chat")[0]
    (model_retry,) = [dict(e.attributes or {}) for e in first_chat.events if e.name == "retry"]
    assert model_retry["bide.retry.attempt"] == 1
    assert model_retry["http.response.status_code"] == 529


async def test_a_stop_short_of_an_end_is_an_event_and_the_error_its_type_only(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    agent = Agent(
        model=ScriptedModel([{"tool_calls": [call("c1", "balance", customer="a")]}]),
        tools=[balance],
        max_turns=1,
    )
    with pytest.raises(BudgetError):
        await agent.run("r", "go", journal=journal)
    drive = the(named(spans, "invoke_agent"))
    assert events(drive) == {
        "stop": {
            "bide.stop.reason": "max_turns",
            "bide.stop.remedy": "raise max_turns in the agent, then resume",
        }
    }
    # The exception that ends the drive is named by its type; its text stays in the logs.
    assert drive.status.status_code is trace.StatusCode.ERROR
    assert dict(drive.attributes or {})["error.type"] == "BudgetError"
    assert "max_turns=1" not in everything_on([drive])


SECRETS = {
    "input": "in-put-7f3a",
    "system": "sys-tem-91c2",
    "argument": "arg-ument-55d0",
    "result": "re-sult-0b8e",
    "answer": "an-swer-c4d1",
    "resolved": "res-olved-2e77",
}


async def secret_run(journal: Journal) -> None:
    @tool(safety=Safety.READ_ONLY)
    async def lookup(customer: str) -> dict[str, str]:
        """Look a customer up."""
        return {"customer": customer, "note": SECRETS["result"]}

    @tool
    async def send(text: str) -> str:
        """Send a message; the answer is lost."""
        raise ToolOutcomeUnknown("no reply")

    script = [
        {"tool_calls": [call("c1", "lookup", customer=SECRETS["argument"])]},
        {"tool_calls": [call("c2", "send", text=SECRETS["argument"])]},
        {"text": SECRETS["answer"]},
    ]
    agent = Agent(
        model=ScriptedModel(script), tools=[lookup, send], system_prompt=SECRETS["system"]
    )
    assert (await agent.run("r", SECRETS["input"], journal=journal)).status is RunStatus.HALTED
    await journal.resolve("r", "c2", Resolution.succeeded(SECRETS["resolved"]), by="bob")
    assert (await agent.resume("r", journal=journal)).status is RunStatus.COMPLETED


def everything_on(spans: Sequence[ReadableSpan]) -> str:
    """Every name, attribute, event, link and status text of the spans, as one string."""
    parts: list[str] = []
    for s in spans:
        parts += [s.name, json.dumps(dict(s.attributes or {}), default=str)]
        parts.append(str(s.status.description))
        for e in s.events:
            parts += [e.name, json.dumps(dict(e.attributes or {}), default=str)]
        for link in s.links:
            parts.append(json.dumps(dict(link.attributes or {}), default=str))
    return "\n".join(parts)


async def test_with_content_capture_off_no_content_appears_on_any_span(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    await secret_run(journal)
    text = everything_on(spans.get_finished_spans())
    assert len(spans.get_finished_spans()) >= 8
    for what, secret in SECRETS.items():
        assert secret not in text, what


async def test_with_content_capture_on_the_content_is_on_the_spans(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    """The opt-in, and the proof that the search of the test above finds what is there."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.configure(tracer_provider=provider, capture_content=True)
    await secret_run(journal)
    text = everything_on(spans.get_finished_spans())
    for what, secret in SECRETS.items():
        assert secret in text, what
    lookup = the(tool_span(spans, "c1"))
    assert json.loads(str(dict(lookup.attributes or {})["gen_ai.tool.call.arguments"])) == {
        "customer": SECRETS["argument"]
    }


async def test_log_events_carry_the_ids_of_the_active_span(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    """The library's own loggers (through the standard logging module) add the active span's
    ids to every event."""
    entries: list[dict[str, Any]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if isinstance(record.msg, dict):
                entries.append(dict(record.msg))

    handler, top = Keep(), logging.getLogger("runtime")
    top.addHandler(handler)
    level, top.level = top.level, logging.INFO
    try:
        agent = Agent(model=ScriptedModel([*BILLING[:1], {"text": "x"}]), tools=[balance])
        await agent.run("r", "go", journal=journal)
    finally:
        top.removeHandler(handler)
        top.setLevel(level)
    started = next(e for e in entries if e["event"] == "tool_started")
    finished = next(e for e in entries if e["event"] == "drive_finished")
    call_span = the(tool_span(spans, "c1")).context
    drive = the(named(spans, "invoke_agent")).context
    assert started["trace_id"] == f"{drive.trace_id:032x}"
    assert started["span_id"] == f"{call_span.span_id:016x}"
    assert finished["span_id"] == f"{drive.span_id:016x}"
    assert tracing.add_trace_ids(None, "info", {"event": "outside"}) == {"event": "outside"}


async def test_an_unsampled_drive_records_nothing_and_journals_no_context(
    journal: Journal,
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        agent = Agent(model=ScriptedModel([*BILLING[:2], {"text": "x"}]), tools=[balance, charge])
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.COMPLETED
    finally:
        tracing.configure()
        provider.shutdown()
    assert exporter.get_finished_spans() == ()
    state = await journal.require("r")
    assert state.start is not None and "trace" not in state.start


async def test_a_wait_for_input_is_an_event_whose_prompt_is_content(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    @tool(safety=Safety.READ_ONLY)
    async def quote(item: str, context: ToolContext) -> int:
        """Ask a person for a price."""
        price: int = await context.interrupt("price", f"What should {item} cost?", expect=int)
        return price

    script = [{"tool_calls": [call("q1", "quote", item="wid-get-93af")]}, {"text": "quoted"}]
    agent = Agent(model=ScriptedModel(script), tools=[quote])
    assert (await agent.run("r", "go", journal=journal)).status is RunStatus.WAITING
    assert events(the(tool_span(spans, "q1")))["waiting"] == {
        "bide.waiting.kind": "input",
        "bide.waiting.key": "price",
    }
    assert "wid-get-93af" not in everything_on(spans.get_finished_spans())

    spans.clear()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.configure(tracer_provider=provider, capture_content=True)
    assert (await agent.resume("r", journal=journal)).status is RunStatus.WAITING
    waiting = events(the(tool_span(spans, "q1")))["waiting"]
    assert waiting["bide.waiting.prompt"] == "What should wid-get-93af cost?"


async def test_a_typed_output_is_on_the_drive_span_as_its_json(
    spans: InMemorySpanExporter, journal: Journal
) -> None:
    import pydantic

    class Invoice(pydantic.BaseModel):
        cents: int

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.configure(tracer_provider=provider, capture_content=True)
    agent = Agent(model=ScriptedModel([{"output": {"cents": 5}}]), output_type=Invoice)
    assert (await agent.run("t", "bill", journal=journal)).output == Invoice(cents=5)
    drive = the(named(spans, "invoke_agent "))
    (answer,) = json.loads(str(dict(drive.attributes or {})["gen_ai.output.messages"]))
    assert json.loads(answer["parts"][0]["content"]) == {"cents": 5}
