"""A payments agent: look a customer up, note the request, charge their card.

Copy this file and change it. It ships inside bide (``python -m runtime demo`` drives it) and is
``examples.payments`` in the repository. Run it with bide's CLI:

    python -m runtime run --agent examples.payments:make_agent "Charge ann 12.00 for May"

It shows the three kinds of tool a durable agent has, and what a crash does to each:

- ``lookup_customer`` only reads: READ_ONLY, re-run freely after a crash.
- ``save_note`` writes, but writing it twice leaves the same state: IDEMPOTENT, retried with the
  same idempotency key.
- ``charge_card`` moves money: SIDE_EFFECT (the default). If the process dies after the charge
  left and before its result was journaled, bide does not charge again: the call halts until
  someone says what happened. ``find_charge``, its declared reconciler, is that someone: it
  looks the charge up in the ledger by the call's idempotency key, and bide journals what it
  found as the halt's resolution, so the run goes on by itself.

The "payments provider" is a small SQLite file (``PAYMENTS_LEDGER``, default
``./payments-ledger.db``), and the model is a ScriptedModel that plays a fixed script: no network
and no API key. To use a real model, pass it as ``model=`` and keep the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from runtime import Agent, Safety, ToolContext, ToolError, tool
from runtime.reconcile import Absent, Attempt, Found
from runtime.testing import ScriptedModel

# What the model "decides", turn by turn. A real model would read the input and choose.
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "lookup_customer", "arguments": {"customer": "ann"}}]},
    {
        "tool_calls": [
            {
                "id": "c2",
                "name": "save_note",
                "arguments": {"customer": "ann", "note": "charge 12.00 for the May invoice"},
            }
        ]
    },
    {
        "tool_calls": [
            {
                "id": "c3",
                "name": "charge_card",
                "arguments": {"customer": "ann", "amount_cents": 1200},
            }
        ]
    },
    {"text": "Charged ann 12.00 for the May invoice on her card on file."},
]


class PaymentsLedger:
    """The payments provider, as a SQLite file: customers, notes, and the charges made.

    Every charge stores the idempotency key it was made with. The provider does not promise to
    deduplicate by it (many do not, or only for a while), which is why ``charge_card`` is a
    SIDE_EFFECT; but the key lets a reconciler find out later whether a charge happened.
    """

    def __init__(self, path: str):
        self.path = path
        with self._connect() as db:
            db.executescript(
                """
                CREATE TABLE IF NOT EXISTS customers (
                    name TEXT PRIMARY KEY, plan TEXT NOT NULL, card TEXT NOT NULL, note TEXT);
                CREATE TABLE IF NOT EXISTS charges (
                    charge_id INTEGER PRIMARY KEY AUTOINCREMENT,
                    customer TEXT NOT NULL,
                    amount_cents INTEGER NOT NULL,
                    idempotency_key TEXT NOT NULL,
                    created_at TEXT NOT NULL);
                INSERT OR IGNORE INTO customers (name, plan, card)
                    VALUES ('ann', 'pro', 'visa 4242');
                """
            )

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # Autocommit: each statement is its own transaction, committed when it returns.
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            yield db
        finally:
            db.close()

    def customer(self, name: str) -> dict[str, Any] | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT name, plan, card, note FROM customers WHERE name = ?", (name,)
            ).fetchone()
        return dict(row) if row is not None else None

    def save_note(self, name: str, note: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE customers SET note = ? WHERE name = ?", (note, name))

    def charge(self, customer: str, amount_cents: int, idempotency_key: str) -> dict[str, Any]:
        """Charge, and return the charge as the provider reports it."""
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO charges (customer, amount_cents, idempotency_key, created_at) "
                "VALUES (?, ?, ?, ?)",
                (customer, amount_cents, idempotency_key, time.strftime("%Y-%m-%d %H:%M:%S")),
            )
        return _charge(cursor.lastrowid, customer, amount_cents)

    def find_charge(self, idempotency_key: str) -> dict[str, Any] | None:
        """The charge made with this key, reported as ``charge`` reports it, if there is one."""
        with self._connect() as db:
            row = db.execute(
                "SELECT charge_id, customer, amount_cents FROM charges "
                "WHERE idempotency_key = ? ORDER BY charge_id LIMIT 1",
                (idempotency_key,),
            ).fetchone()
        return _charge(*row) if row is not None else None

    def charges(self) -> list[dict[str, Any]]:
        """Every charge made, oldest first, with its idempotency key."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM charges ORDER BY charge_id").fetchall()
        return [dict(r) for r in rows]


def _charge(charge_id: Any, customer: str, amount_cents: int) -> dict[str, Any]:
    return {"charge_id": f"ch_{charge_id}", "customer": customer, "amount_cents": amount_cents}


def ledger_path() -> str:
    return os.environ.get("PAYMENTS_LEDGER", "payments-ledger.db")


def make_agent() -> Agent[Any]:
    """The agent, for ``--agent examples.payments:make_agent``."""
    ledger = PaymentsLedger(ledger_path())

    # sqlite3 blocks; asyncio.to_thread keeps the event loop (and other runs) moving meanwhile.

    @tool(safety=Safety.READ_ONLY)
    async def lookup_customer(customer: str) -> dict[str, Any]:
        """Find a customer: their plan and the card on file."""
        found = await asyncio.to_thread(ledger.customer, customer)
        if found is None:
            raise ToolError(f"no customer named {customer!r}")  # the model sees this error
        return found

    @tool(safety=Safety.IDEMPOTENT)
    async def save_note(customer: str, note: str) -> dict[str, Any]:
        """Set the note on a customer's account (setting the same note twice changes nothing)."""
        await asyncio.to_thread(ledger.save_note, customer, note)
        return {"customer": customer, "note": note}

    async def find_charge(attempt: Attempt) -> Found | Absent:
        """What happened to a halted charge: the ledger keeps every charge's idempotency key."""
        charge = await asyncio.to_thread(ledger.find_charge, attempt.idempotency_key)
        if charge is None:
            return Absent(f"no ledger charge carries idempotency key {attempt.idempotency_key}")
        # The very value charge_card returns: the model sees what it would have seen.
        return Found(charge, f"ledger charge {charge['charge_id']} carries the call's key")

    # No safety given: a SIDE_EFFECT, run at most once. The ledger is a local file: once the
    # charging process is gone, a charge that is not in it never will be (settle=0). A remote
    # provider needs the time a request could still take to land (its timeout, the default).
    @tool(reconcile=find_charge, settle=0)
    async def charge_card(customer: str, amount_cents: int, context: ToolContext) -> dict[str, Any]:
        """Charge the customer's card on file, in cents."""
        if amount_cents <= 0:
            raise ToolError("amount_cents must be positive")
        # The key is the same on every attempt of this call; the provider keeps it with the
        # charge, so that a reconciler can look the charge up if its result is lost.
        return await asyncio.to_thread(
            ledger.charge, customer, amount_cents, context.idempotency_key
        )

    return Agent(
        name="payments",
        model=ScriptedModel(SCRIPT),
        tools=[lookup_customer, save_note, charge_card],
        system_prompt="You handle billing requests. Look the customer up before charging.",
        max_turns=10,
    )
