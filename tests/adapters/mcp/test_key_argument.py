"""The idempotency key as a tool argument (``tools(..., idempotency_argument=...)``): the key the
server reads is bide's, the same on every attempt, whatever the model put there, and the journal
shows both.

Against a real in-process MCP server whose ``pay`` tool takes ``idempotency_key`` as an argument,
as payment servers do; ``show`` is the real CLI in a child process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from adapters.mcp import connect, tools
from runtime import Agent, Journal, Resolution, RunStatus, Safety
from runtime import records as R
from runtime.errors import ConfigError, ToolError
from runtime.retry import RetryPolicy
from runtime.testing import ScriptedModel
from runtime.tools import ToolContext, idempotency_key_for
from tests.cli.invoke import child


class Payments:
    """The server's ledger: every (amount, key) it was asked to pay, and how slow it is."""

    def __init__(self, *, slow_first: int = 0) -> None:
        self.paid: list[tuple[int, str]] = []
        self.slow_first = slow_first

    def server(self) -> MCPServer:
        server = MCPServer("payments")

        @server.tool()
        async def pay(amount: int, idempotency_key: str) -> str:
            """Pay an amount. Give a fresh idempotency_key for each payment."""
            self.paid.append((amount, idempotency_key))
            if len(self.paid) <= self.slow_first:
                await asyncio.sleep(5)  # past the call's timeout: its answer never arrives
            return f"paid {amount}"

        @server.tool()
        async def count(n: int) -> str:
            """A tool whose only argument is not a string."""
            return str(n)

        return server


def script(model_key: str | None) -> list[dict[str, Any]]:
    arguments: dict[str, Any] = {"amount": 7}
    if model_key is not None:
        arguments["idempotency_key"] = model_key
    return [
        {"tool_calls": [{"id": "c1", "name": "pay", "arguments": arguments}]},
        {"text": "done"},
    ]


async def drive(
    db: Path,
    payments: Payments,
    *,
    model_key: str | None = "model-minted-1",
    safety: Safety = Safety.SIDE_EFFECT,
    wait: float = 10,
    resume: bool = False,
) -> Any:
    async with connect(payments.server(), name="payments") as session:
        listed = await tools(
            session,
            safety={"pay": safety},
            idempotency_argument={"pay": "idempotency_key"},
            call_timeout=wait,
        )
        retry = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.01)
        agent = Agent(model=ScriptedModel(script(model_key)), tools=listed, tool_retry=retry)
        async with Journal(db) as journal:
            if resume:
                result = await agent.resume("r", journal=journal)
            else:
                result = await agent.run("r", "pay", journal=journal)
            state = await journal.require("r")
    return result, state


async def test_a_key_the_model_gave_is_replaced_by_bides_and_the_journal_shows_both(
    db_path: Path,
) -> None:
    payments = Payments()
    result, state = await drive(db_path, payments)
    assert result.status is RunStatus.COMPLETED
    key = idempotency_key_for("r", "c1")
    assert payments.paid == [(7, key)]  # the server never saw the model's key
    (turn,) = [r for r in state.records if r.kind == R.TURN][:1]
    assert "model-minted-1" in str(turn.payload)  # what the model said, as it said it
    step = state.calls["c1"].handles[1][1].payload
    assert step["in_flight"] is True
    assert step["handle"] == {
        "mcp_call": {"server": "payments", "principal": None},
        "mcp_key_argument": {
            "argument": "idempotency_key",
            "sent": key,
            "model_gave": "model-minted-1",
        },
    }
    shown = child("show", "--db", str(db_path), "r")
    assert shown.code == 0, shown.err
    assert key in shown.out and "model-minted-1" in shown.out


async def test_without_a_key_from_the_model_bides_is_sent_all_the_same(db_path: Path) -> None:
    payments = Payments()
    result, state = await drive(db_path, payments, model_key=None)
    assert result.status is RunStatus.COMPLETED
    assert payments.paid == [(7, idempotency_key_for("r", "c1"))]
    step = state.calls["c1"].handles[1][1].payload["handle"]["mcp_key_argument"]
    assert "model_gave" not in step


async def test_a_retried_idempotent_call_sends_the_same_key_every_time(db_path: Path) -> None:
    payments = Payments(slow_first=1)
    result, _ = await drive(db_path, payments, safety=Safety.IDEMPOTENT, wait=0.5)
    assert result.status is RunStatus.COMPLETED
    key = idempotency_key_for("r", "c1")
    assert payments.paid == [(7, key), (7, key)]  # a retry, never a fresh key


async def test_a_side_effect_attempted_again_after_a_halt_sends_the_same_key(
    db_path: Path,
) -> None:
    payments = Payments(slow_first=1)
    result, state = await drive(db_path, payments, wait=0.5)
    assert result.status is RunStatus.HALTED  # the answer was lost: unknown outcome
    assert state.calls["c1"].halted
    async with Journal(db_path) as journal:
        assert await journal.resolve("r", "c1", Resolution.not_executed(), by="alice")
    result, state = await drive(db_path, payments, resume=True)
    assert result.status is RunStatus.COMPLETED
    key = idempotency_key_for("r", "c1")
    assert payments.paid == [(7, key), (7, key)]  # attempt 2 carries attempt 1's key
    assert state.calls["c1"].attempt == 2
    steps = [h.payload["handle"] for _, h in sorted(state.calls["c1"].handles[2].items())]
    assert steps[0]["mcp_key_argument"]["sent"] == key


async def test_the_model_is_not_asked_for_the_key() -> None:
    async with connect(Payments().server(), name="payments") as session:
        listed = await tools(session, idempotency_argument={"pay": "idempotency_key"})
        plain = await tools(session)
    (pay,) = [t for t in listed if t.spec.name == "pay"]
    (plain_pay,) = [t for t in plain if t.spec.name == "pay"]
    assert "idempotency_key" in plain_pay.spec.input_schema["required"]
    assert pay.spec.input_schema["required"] == ["amount"]
    described = pay.spec.input_schema["properties"]["idempotency_key"]["description"]
    assert "Set by the host" in described


async def test_a_call_without_a_context_has_no_key_and_is_not_sent() -> None:
    payments = Payments()
    async with connect(payments.server(), name="payments") as session:
        (pay,) = [
            t
            for t in await tools(session, idempotency_argument={"pay": "idempotency_key"})
            if t.spec.name == "pay"
        ]
        with pytest.raises(ToolError, match="was not called: its argument"):
            await pay.call({"amount": 1})
        await pay.call({"amount": 2}, ToolContext(run_id="r", call_id="c9", tool_name="pay"))
    assert payments.paid == [(2, idempotency_key_for("r", "c9"))]


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"refund": "idempotency_key"}, "lists no tool of that name"),
        ({"pay": "key"}, "lists no such argument"),
        ({"count": "n"}, "bide's key is a string"),
        ({"pay": ""}, "must name one argument"),
    ],
)
async def test_a_key_argument_the_server_does_not_have_is_a_config_error(
    option: dict[str, str], said: str
) -> None:
    async with connect(Payments().server(), name="payments") as session:
        with pytest.raises(ConfigError, match=said):
            await tools(session, idempotency_argument=option)
