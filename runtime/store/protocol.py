"""The Store protocol: what a journal's storage must do, whatever the database under it.

The drive and the operator's verbs speak only this. ``SQLiteStore`` is the embedded
implementation, ``PostgresStore`` the shared one, and ``MemoryStore`` keeps the same contract in
dicts (for benches and for users' tests); all three are built on ``front.StoreFront`` and settle
their writes with ``decide``. Give a Journal any store with ``Journal(store=...)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from runtime.ownership import Lease, Owner
from runtime.records import Appended, Entry, Record

__all__ = ["RunPage", "RunRow", "Store", "Wakeups"]


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run as the index lists it (derived; the records are the truth)."""

    run_id: str
    format: int
    status: str
    agent: str | None
    turns: int
    created_ms: int
    updated_ms: int
    detail: Any
    lease: Lease | None = None
    """Who drives the run (or last drove it), if a drive ever held its lease."""


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[RunRow]
    next_cursor: str | None
    """Pass as ``before=`` for the next (older) page; ``None`` on the last page."""


@runtime_checkable
class Store(Protocol):
    """Per-run append-only records under insert-if-absent keys, in one commit order.

    The contract every implementation keeps (the conformance tests in ``tests/journal`` hold
    each one to it):

    - ``append`` inserts ``payload`` under ``(run_id, key)`` unless the key exists; of two
      writers of one key exactly one wins, and both get the winning record. ``unless`` names
      keys whose presence refuses the insert, checked in the same transaction (``refused_by``
      says which); ``watch`` names a key whose presence is reported back; ``index`` updates the
      run's listing row in the same transaction. A caller is answered only after its record is
      durably committed.
    - ``append(before=entries)`` writes those records first, in order, in the same
      transaction: all of them and the record, or nothing. A guard refuses them all; a key of
      them, or the record's own, that exists already fails the append with ``StorageError``
      (a drive writes ahead only keys that are its own to write). ``Appended.before`` holds
      them as committed.
    - ``append(epoch=e, release=True)`` releases the run's lease (of epoch ``e``) in the same
      transaction, unless the append is refused or fails: a drive's end record and the end of
      its lease commit together (``Appended.released``).
    - ``seq`` orders records by commit across the whole store.
    - Nothing is ever updated or deleted; the listing index is derived.

    Leases (``runtime.ownership``), one per run, on the store's own clock:

    - ``acquire`` grants the lease when the run has none, or its lease is released or expired,
      or its epoch is ``take_over`` (the caller found its holder gone); the granted lease has
      the next epoch (1 for the first) and expires ``ttl`` seconds from now. Otherwise it
      raises ``RunBusy`` carrying the current lease. Of two acquirers exactly one wins.
    - ``create_run``, ``append`` and ``update_index`` given ``epoch`` are refused with
      ``LeaseLost``, inside the same transaction and writing nothing, unless the run's lease
      has that epoch (expired but not taken over still counts as held).
    - ``renew`` extends a lease of that epoch by ``ttl`` from now (``LeaseLost`` if the epoch
      moved on); ``release`` marks it released (False, changing nothing, if it moved on).
    - ``claimable`` lists runs a worker may drive: index status ``running`` or ``submitted``
      and a lease that is absent, released or expired, or, given ``host``, held by an owner
      on that host (the caller checks that owner is gone before taking it over); least
      recently updated first. A queued run that never started is not listed: it is claimed
      through its queue (``runtime.store.queues``). Given ``agent``, only the runs whose index
      row names that agent (the one that started them) are listed.
    """

    @property
    def path(self) -> str:
        """Where the journal lives, for messages (a file path, a redacted URL, a name)."""
        ...

    @property
    def commits(self) -> int:
        """How many transactions were committed (group commit shares them)."""
        ...

    async def close(self) -> None: ...

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        """Write the run's header unless the run exists; True if it is new."""
        ...

    async def append(
        self,
        run_id: str,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | tuple[str, ...] | None = None,
        watch: str | None = None,
        index: Mapping[str, Any] | None = None,
        epoch: int | None = None,
        before: Sequence[Entry] = (),
        release: bool = False,
    ) -> Appended: ...

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None: ...

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease: ...

    async def renew(self, lease: Lease, *, ttl: float) -> Lease: ...

    async def release(self, lease: Lease) -> bool: ...

    async def lease(self, run_id: str) -> Lease | None: ...

    async def claimable(
        self, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]: ...

    async def clock_ms(self) -> int:
        """The journal's clock, in milliseconds: the one clock every decision on time that
        ownership or settling depends on is judged by (PostgreSQL's; on SQLite this host's
        boot-time clock), never a process's wall clock. Leases' times are on it."""
        ...

    async def get(self, run_id: str, key: str) -> Record | None: ...

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        ...

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        """The run's records in commit order: those with ``seq > after``, and with keys that
        start with ``prefix`` if it is given."""
        ...

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage: ...

    async def run_row(self, run_id: str) -> RunRow | None: ...


@runtime_checkable
class Wakeups(Protocol):
    """What a store may also do (optional): tell a worker that runs became ready, so that it
    claims them at once rather than at its next poll.

    ``wakeups()`` yields the id of each run that a committed write made ready, from any process
    on the store, and ``None`` whenever it may have missed some (so: look). It outlives lost
    connections (logged, retried) and ends only when its consumer stops. It is a shortcut:
    a worker still polls ``claimable``, and must not rely on hearing every run.
    """

    def wakeups(self) -> AsyncIterator[str | None]: ...
