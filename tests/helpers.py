"""Tools for tests that count what really ran, and a journal that fails its K-th write."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from runtime import Safety, ToolContext, ToolError, ToolOutcomeUnknown, tool
from runtime.errors import StorageError
from runtime.functions import FunctionTool
from runtime.journal import Journal, Store


@dataclass
class Ledger:
    """Every real execution of a test tool: (tool, call arguments, idempotency key)."""

    executions: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)

    def count(self, name: str) -> int:
        return sum(1 for n, _, _ in self.executions if n == name)

    def keys(self, name: str) -> list[str | None]:
        return [k for n, _, k in self.executions if n == name]


def make_tools(ledger: Ledger) -> dict[str, FunctionTool]:
    """A READ_ONLY lookup, an IDEMPOTENT upsert and a SIDE_EFFECT charge, all ledgered."""

    @tool(safety=Safety.READ_ONLY)
    async def lookup(customer: str, context: ToolContext) -> dict[str, Any]:
        """Look up a customer."""
        ledger.executions.append(("lookup", {"customer": customer}, context.idempotency_key))
        return {"customer": customer, "plan": "pro"}

    @tool(safety=Safety.IDEMPOTENT)
    async def upsert(customer: str, note: str, context: ToolContext) -> dict[str, Any]:
        """Store a note (idempotent by key)."""
        ledger.executions.append(("upsert", {"customer": customer}, context.idempotency_key))
        return {"stored": note}

    @tool
    async def charge(customer: str, amount: int, context: ToolContext) -> dict[str, Any]:
        """Charge a customer (a side effect)."""
        ledger.executions.append(("charge", {"amount": amount}, context.idempotency_key))
        return {"charged": amount, "customer": customer}

    return {"lookup": lookup, "upsert": upsert, "charge": charge}


def flaky(
    ledger: Ledger, name: str, safety: Safety, failures: list[BaseException], **kwargs: Any
) -> FunctionTool:
    """A tool that raises the given exceptions on its first calls, then returns ``{"ok": n}``."""

    async def fn(context: ToolContext) -> dict[str, Any]:
        ledger.executions.append((name, {}, context.idempotency_key))
        if failures:
            raise failures.pop(0)
        return {"ok": ledger.count(name)}

    fn.__name__ = name
    return tool(safety=safety, **kwargs)(fn)


def slow(ledger: Ledger, name: str, safety: Safety, seconds: float, **kwargs: Any) -> FunctionTool:
    async def fn(context: ToolContext) -> dict[str, Any]:
        ledger.executions.append((name, {}, context.idempotency_key))
        await asyncio.sleep(seconds)
        return {"slept": seconds}

    fn.__name__ = name
    return tool(safety=safety, **kwargs)(fn)


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


class FaultyStore:
    """A Store whose K-th write (create or append) fails, before or after it commits."""

    def __init__(self, inner: Store, k: int, *, after_commit: bool):
        self._inner = inner
        self._k = k
        self._after = after_commit
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == self._k and not self._after:
            raise StorageError(f"injected failure before write {self._k}")
        result = await getattr(self._inner, method)(*args, **kwargs)
        if self.writes == self._k:
            raise StorageError(f"injected failure after write {self._k}")
        return result

    async def create_run(self, *args: Any, **kwargs: Any) -> Any:
        return await self._write("create_run", *args, **kwargs)

    async def append(self, *args: Any, **kwargs: Any) -> Any:
        return await self._write("append", *args, **kwargs)


def inject(journal: Journal, k: int, *, after_commit: bool) -> FaultyStore:
    faulty = FaultyStore(journal.store, k, after_commit=after_commit)
    journal._store = faulty  # type: ignore[assignment]
    return faulty


__all__ = ["FaultyStore", "Ledger", "ToolError", "ToolOutcomeUnknown", "call", "flaky", "inject"]
