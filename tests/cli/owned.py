"""Agents for the ownership tests (``tests.cli.owned:ATTR``): a slow charge that writes a ledger
file, and a slow lookup. From the environment of the process that drives the run: ``SLOW``, the
seconds a slow tool waits at most, ``RELEASE``, a file whose creation ends the wait early, and
``LEDGER``, the file each real effect is written to."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from runtime import Agent, Safety, ToolContext, tool
from runtime.reconcile import Absent, Attempt, Found, Unknown
from runtime.testing import ScriptedModel

CHARGE = [
    {"tool_calls": [{"id": "c1", "name": "slow_charge", "arguments": {"amount": 5}}]},
    {"text": "charged"},
]
LOOKUP = [
    {"tool_calls": [{"id": "c1", "name": "slow_lookup", "arguments": {}}]},
    {"text": "looked"},
]


async def _slowly() -> None:
    deadline = time.monotonic() + float(os.environ.get("SLOW") or 0)
    release = os.environ.get("RELEASE")
    while time.monotonic() < deadline and not (release and os.path.exists(release)):
        await asyncio.sleep(0.02)


def ledger(context: ToolContext) -> None:
    """One line per real effect: run id and call id (O_APPEND: processes may share the file)."""
    line = f"{context.run_id} {context.call_id}\n".encode()
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@tool
async def slow_charge(amount: int, context: ToolContext) -> dict[str, Any]:
    """Charge, after a while (SLOW seconds): killed while it waits, it never charged."""
    await _slowly()
    ledger(context)
    return {"charged": amount}


@tool(safety=Safety.READ_ONLY)
async def slow_lookup() -> dict[str, Any]:
    """Look something up, slowly."""
    await _slowly()
    return {"found": True}


@tool
async def charge(amount: int, context: ToolContext) -> dict[str, Any]:
    """Charge at once, then take a moment (CHARGE_PAUSE, default 0.02 s) to answer: a kill may
    land in between."""
    ledger(context)
    await asyncio.sleep(float(os.environ.get("CHARGE_PAUSE") or 0.02))
    return {"charged": amount}


slow = Agent(model=ScriptedModel(CHARGE), tools=[slow_charge], name="slow")
lookup = Agent(model=ScriptedModel(LOOKUP), tools=[slow_lookup], name="lookup")
payments = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
            {"text": "charged"},
        ]
    ),
    tools=[charge],
    name="payments",
)


def _charged(run_id: str, call_id: str) -> bool:
    path = os.environ["LEDGER"]
    return os.path.exists(path) and f"{run_id} {call_id}" in open(path).read().splitlines()


async def find_charge(attempt: Attempt) -> Found | Absent | Unknown:
    """Look the charge up in the ledger by its run and call (a provider would use the key)."""
    if os.environ.get("LOOKUP_DOWN"):
        return Unknown("the ledger is unreachable")
    if _charged(attempt.run_id, attempt.call_id):
        return Found({"charged": attempt.arguments["amount"]}, f"ledger line {attempt.run_id}")
    return Absent(f"no ledger line for {attempt.run_id} {attempt.call_id}")


@tool(reconcile=find_charge, settle=float(os.environ.get("SETTLE") or 5))
async def reconciled_charge(amount: int, context: ToolContext) -> dict[str, Any]:
    """A slow charge that can be looked up: waits (SLOW), then charges."""
    await _slowly()
    ledger(context)
    return {"charged": amount}


reconciled = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "reconciled_charge", "arguments": {"amount": 5}}]},
            {"text": "charged"},
        ]
    ),
    tools=[reconciled_charge],
    name="reconciled",
)


@tool(safety=Safety.IDEMPOTENT)
async def nap(context: ToolContext) -> str:
    """Sleep durably (NAP seconds), then say so in the ledger with the wall-clock time."""
    await context.sleep(float(os.environ.get("NAP") or 1))
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{context.run_id} woke {time.time():.3f}\n".encode())
    finally:
        os.close(fd)
    return "rested"


napping = Agent(
    model=ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "nap", "arguments": {}}]},
            {"tool_calls": [{"id": "c2", "name": "reconciled_charge", "arguments": {"amount": 5}}]},
            {"text": "charged"},
        ]
    ),
    tools=[nap, reconciled_charge],
    name="napping",
)
