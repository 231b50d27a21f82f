"""A journal's queues and their limits: ``journal.queues``.

``await journal.queues.set("payments", concurrency=10, key_concurrency=1, rate=100,
period=60)``: workers start the runs submitted to ``payments`` (``agent.submit(...,
queue="payments", concurrency_key="customer:ann")``) only while fewer than 10 of them are
active, fewer than 1 of one key, and fewer than 100 started in the last minute; the rule is
``runtime.store.queues.admit``, decided in the transaction that grants the run's lease.
"""

from __future__ import annotations

from typing import Any

from runtime.errors import ConfigError
from runtime.store.queues import QueueInfo, QueueLimits, Queues, check_name

__all__ = ["QueueInfo", "QueueLimits", "QueueSettings"]


class QueueSettings:
    """A journal's queue limits: ``journal.queues``."""

    def __init__(self, store: Any):
        if not isinstance(store, Queues):
            raise ConfigError(f"the journal's store ({type(store).__name__}) keeps no queues")
        self._store = store

    async def set(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
    ) -> QueueLimits:
        """Set the queue's limits (each ``None``: no limit of that kind), replacing any it had.
        Runs already started are not stopped; a lower limit holds back the next starts."""
        limits = QueueLimits(concurrency, key_concurrency, rate, period)
        await self._store.set_limits(name, limits)
        return limits

    async def clear(self, name: str) -> None:
        """Remove the queue's limits: its runs start as soon as a worker is free."""
        check_name("queue name", name)
        await self._store.set_limits(name, None)

    async def list(self) -> list[QueueInfo]:
        """The queues with limits, by name, with how many runs are active and waiting."""
        return await self._store.queues()
