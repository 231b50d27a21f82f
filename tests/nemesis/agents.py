"""The nemesis suite's agents, for ``--agent tests.nemesis.agents:NAME`` in child processes.

One script: a charge (``c1``, a side effect), then the final answer. The charge sends its request
to the provider (``tests/nemesis/book.py``) and waits for the provider to commit it. ``charge``
declares the reconciler ``find_charge`` (the charge looked up in the ledger by its idempotency
key) when ``NEMESIS_RECONCILE`` is set; ``person`` never does, so its halts wait for a person.

Environment: ``NEMESIS_LEDGER`` (the ledger file), ``NEMESIS_TIMEOUT`` (the charge's timeout,
seconds), ``NEMESIS_SETTLE`` (the settle time the charge declares; empty: none),
``NEMESIS_RECONCILE``, ``NEMESIS_GATE`` (a file: a reconciler that looked waits for it to exist
before it answers, a reconciler slower than the run it judges).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from runtime import Agent, Safety, ToolContext, faults
from runtime.functions import FunctionTool, tool
from runtime.reconcile import Absent, Attempt, Found, Reconciler, Unknown
from runtime.testing import ScriptedModel
from tests.crash.agents import charge_reconciler
from tests.nemesis.book import Book

__all__ = ["FINAL", "charge", "person", "run_input"]

FINAL = "all done"
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"n": 1}}]},
    {"text": FINAL},
]


def run_input(run_id: str) -> str:
    return f"run {run_id}"


def _seconds(name: str) -> float | None:
    text = os.environ.get(name, "")
    return float(text) if text else None


def judging(book: Book, inner: Reconciler) -> Reconciler:
    """``inner``, with every look-up and answer written to the ledger (which attempt it judged),
    and, under ``NEMESIS_GATE``, its answer held back until that file exists."""
    gate = os.environ.get("NEMESIS_GATE")

    async def find_charge(attempt: Attempt) -> Found | Absent | Unknown:
        said = await inner(attempt)
        word = {Found: "found", Absent: "absent"}.get(type(said), "unknown")
        where = (attempt.run_id, attempt.call_id, attempt.attempt)
        await asyncio.to_thread(book.judge, *where, word, "looked")
        while gate and not os.path.exists(gate):
            await asyncio.sleep(0.02)
        await asyncio.to_thread(book.judge, *where, word, "answered")
        return said

    return find_charge


def _charge(book: Book, *, reconciled: bool) -> FunctionTool:
    async def charge(n: int, context: ToolContext) -> dict[str, Any]:
        await asyncio.to_thread(book.begin, context.run_id, context.call_id, "charge")
        key = context.idempotency_key
        assert key is not None
        request = await asyncio.to_thread(book.request, context.run_id, context.call_id, key, n)
        while (execution := await asyncio.to_thread(book.answer, request)) is None:
            await asyncio.sleep(0.02)
        faults.crashpoint("tool.after_effect")
        return {"tool": "charge", "n": n, "execution": execution}

    charge.__doc__ = "Charge a card (a side effect, committed by the provider)."
    timeout = _seconds("NEMESIS_TIMEOUT")
    if reconciled and os.environ.get("NEMESIS_RECONCILE"):
        settle = _seconds("NEMESIS_SETTLE")
        found = judging(book, charge_reconciler(book))
        found.__name__ = "find_charge"
        if settle is None:
            return tool(reconcile=found, timeout=timeout)(charge)
        return tool(reconcile=found, settle=settle, timeout=timeout)(charge)
    return tool(safety=Safety.SIDE_EFFECT, timeout=timeout)(charge)


def _agent(*, reconciled: bool) -> Agent:
    book = Book(os.environ["NEMESIS_LEDGER"])
    return Agent(
        name="nemesis",
        model=ScriptedModel(SCRIPT),
        tools=[_charge(book, reconciled=reconciled)],
        max_turns=len(SCRIPT) + 1,
    )


def charge() -> Agent:
    """The charge, with ``find_charge`` when ``NEMESIS_RECONCILE`` is set."""
    return _agent(reconciled=True)


def person() -> Agent:
    """The charge with no reconciler: its halts wait for a person."""
    return _agent(reconciled=False)
