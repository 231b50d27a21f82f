"""Journal: the public handle on a journal (a file or a database); the operator's verbs it
also offers (resolve, approve, answer, cancel) are ``verbs.OperatorVerbs``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Self

from runtime.errors import ConfigError
from runtime.events.hub import IDLE
from runtime.events.types import Event
from runtime.holding import Renewer
from runtime.journal.queues import QueueSettings
from runtime.journal.schedules import Schedules
from runtime.journal.verbs import OperatorVerbs
from runtime.logs import get_logger
from runtime.ownership import DEFAULT_TTL, Lease, is_alive
from runtime.state import RunState
from runtime.store import open_store
from runtime.store.protocol import RunPage, RunRow, Store
from runtime.store.sqlite import BUSY_TIMEOUT_MS

__all__ = ["Journal"]

log = get_logger(__name__)


class Journal(OperatorVerbs):
    """An open journal: ``async with Journal(url) as journal:``.

    ``url`` is ``sqlite+aiosqlite:///path`` or a file path, or a PostgreSQL database:
    ``postgresql://user@host/db`` (or ``postgresql+asyncpg://``; needs ``bide[postgres]``).
    The schema is migrated to this bide's head on open unless ``migrate=False``, which only
    verifies it. One Journal serves many runs and many agents at once; its writer
    group-commits all of them.

    ``Journal(store=...)`` uses a store made elsewhere instead (anything that keeps the ``Store``
    protocol, such as ``runtime.testing.MemoryStore``); closing the Journal closes it.

    Every drive through this Journal holds its run's lease: ``lease_ttl`` seconds unless
    renewed, renewed every ``lease_renew`` seconds (default a third of the TTL) by one task
    the Journal owns for all of them (``renewer``).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        migrate: bool = True,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        lease_ttl: float = DEFAULT_TTL,
        lease_renew: float | None = None,
    ):
        if (url is None) == (store is None):
            raise ConfigError("a Journal needs a url or a store (one of them)")
        if store is not None and not isinstance(store, Store):
            raise ConfigError(f"{store!r} does not implement the Store protocol")
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float) or lease_ttl <= 0:
            raise ConfigError(f"lease_ttl is a positive number of seconds, not {lease_ttl!r}")
        renew = lease_ttl / 3 if lease_renew is None else lease_renew
        if (
            isinstance(renew, bool)
            or not isinstance(renew, int | float)
            or not 0 < renew < lease_ttl
        ):
            raise ConfigError(
                f"lease_renew must be a positive number of seconds below lease_ttl ({lease_ttl}),"
                f" not {renew!r}"
            )
        self.lease_ttl = float(lease_ttl)
        self.lease_renew = float(renew)
        self.url = url
        self._migrate = migrate
        self._busy_timeout_ms = busy_timeout_ms
        self._given = store
        self._store: Store | None = None
        self._renewer: Renewer | None = None

    async def open(self) -> Self:
        if self._store is None:
            if self._given is not None:
                self._store = self._given
            elif self.url is None:
                raise ConfigError("this Journal's store was closed; make a new Journal")
            else:
                self._store = await open_store(
                    self.url, migrate=self._migrate, busy_timeout_ms=self._busy_timeout_ms
                )
            self._renewer = Renewer(self._store, ttl=self.lease_ttl, renew=self.lease_renew)
        return self

    async def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            renewer, self._renewer = self._renewer, None
            self._given = None  # a closed store is not reopened
            try:
                if renewer is not None:
                    await renewer.aclose()
            finally:
                await store.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def store(self) -> Store:
        if self._store is None:
            raise ConfigError("the journal is not open: use `async with Journal(url) as j:`")
        return self._store

    @property
    def renewer(self) -> Renewer:
        """Renews the lease of every drive through this Journal (``runtime.holding``)."""
        if self._renewer is None:
            raise ConfigError("the journal is not open: use `async with Journal(url) as j:`")
        return self._renewer

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def schedules(self) -> Schedules:
        """The journal's schedules: add, list, pause, resume, remove (``journal.schedules``)."""
        return Schedules(self.store)

    @property
    def queues(self) -> QueueSettings:
        """The journal's queue limits: set, clear, list (``journal.queues``)."""
        return QueueSettings(self.store)

    # --- reading runs ----------------------------------------------------------------------

    async def state(self, run_id: str) -> RunState | None:
        """The run folded from its records, or ``None`` if there is no such run."""
        if not await self.store.check_run(run_id):
            return None
        return RunState.fold(run_id, await self.store.load(run_id))

    def events(
        self, run_id: str, *, after: int | str = 0, live: bool = True, idle: float | None = IDLE
    ) -> AsyncIterator[Event]:
        """The run's events after cursor ``after``, from the journal, then (``live``) as they
        are committed, by any process, until its end or ``idle`` seconds without one
        (``runtime.events.live``)."""
        from runtime.events.live import follow  # it imports the store, which imports this

        return follow(self.store, run_id, after=after, live=live, idle=idle)

    async def lease(self, run_id: str) -> Lease | None:
        """The run's lease: who drives it (``live`` and ``is_alive`` say if they still do)."""
        return await self.store.lease(run_id)

    async def status(self, run_id: str) -> str | None:
        """The run's status with liveness (``RunState.live_status``): ``running`` while a live
        owner drives it, ``orphaned`` when none does and it has not ended; None if no run."""
        state = await self.state(run_id)
        if state is None:
            return None
        row = await self.store.run_row(run_id)
        lease = row.lease if row is not None else None
        submitted = row is not None and row.status == "submitted"
        return state.live_status(lease if is_alive(lease) else None, submitted=submitted)

    async def require(self, run_id: str) -> RunState:
        state = await self.state(run_id)
        if state is None:
            raise ConfigError(f"no run {run_id!r} in {self.path}", run_id=run_id)
        return state

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        """Runs newest first, as their last driver (or the operator's verbs) left them."""
        return await self.store.list_runs(status=status, prefix=prefix, limit=limit, before=before)

    async def run_row(self, run_id: str) -> RunRow | None:
        """The run's row in the listing index, if the run exists."""
        return await self.store.run_row(run_id)
