"""The Store protocol: what a journal's storage must do, whatever the database under it.

The drive and the operator's verbs speak only this. ``SQLiteStore`` is the embedded
implementation; ``runtime.testing.MemoryStore`` keeps the same contract in a dict (for benches
and for users' tests). Give a Journal any store with ``Journal(store=...)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from runtime.errors import ConfigError, StorageError
from runtime.ownership import Lease, Owner
from runtime.records import Appended, Entry, Record
from runtime.store.codec import decode, encode, unstorable_text
from runtime.store.names import INDEX_COLUMNS

__all__ = [
    "RunPage",
    "RunRow",
    "Store",
    "Wakeups",
    "appended",
    "check_appended",
    "check_query",
    "check_release",
    "check_run_id",
    "index_fields",
    "parse_cursor",
    "ttl_ms",
    "written_ahead",
]


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
      recently updated first.
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
        self, *, limit: int = 10, host: str | None = None
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


# --- what every store checks the same way --------------------------------------------------------


def check_release(release: bool, epoch: int | None) -> None:
    """A lease is released with an append only by the drive that holds it: ``release`` needs
    the ``epoch`` the append is fenced by."""
    if release and epoch is None:
        raise ConfigError("append(release=True) releases the lease of the given epoch: pass it")


def check_run_id(run_id: object) -> None:
    """``ConfigError`` unless ``run_id`` is a non-empty string of at most 256 characters that
    the journal can store (``codec.unstorable_text``). Reads check it too: no run has such an
    id, and PostgreSQL refuses a NUL even in a query."""
    problem = unstorable_text(run_id, name="run id")
    if problem is not None or not isinstance(run_id, str) or not run_id or len(run_id) > 256:
        why = f" ({problem})" if problem is not None else ""
        raise ConfigError(
            f"a run id is a non-empty string of at most 256 characters: {run_id!r}{why}"
        )


def check_query(**texts: str | None) -> None:
    """``ConfigError`` for a text given to a read that no record or run can hold (a NUL, text
    that is not valid Unicode): PostgreSQL refuses such a query outright, and SQLite would
    answer for a run that cannot exist; both backends refuse it alike."""
    for name, text in texts.items():
        if text is not None and (not text.isascii() or "\x00" in text):
            problem = unstorable_text(text, name=name.replace("_", " "))
            if problem is not None:
                raise ConfigError(f"no run can match this {problem}: {text!r}")


def check_appended(
    run_id: str,
    key: str,
    kind: str,
    unless: str | tuple[str, ...] | None = None,
    watch: str | None = None,
    before: Sequence[Entry] = (),
) -> None:
    """``ConfigError`` for an append naming a run, key or kind the journal cannot store (a
    NUL, text that is not valid Unicode): refused before it reaches a batch, where it would fail
    the writes of other runs committed with it."""
    check_run_id(run_id)
    texts = [("key", key), ("kind", kind)]
    texts += [("guard key", g) for g in ((unless,) if isinstance(unless, str) else unless or ())]
    texts += [("watched key", watch)] if watch is not None else []
    for entry in before:
        texts += [("key", entry.key), ("kind", entry.kind)]
    for name, text in texts:
        problem = unstorable_text(text, name=name)
        if problem is not None:
            raise ConfigError(f"run {run_id!r}: a record's {problem}: {text!r}")


def index_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The listing row's columns to write, ``detail`` encoded; ``StorageError`` for a column the
    index does not have."""
    out = dict(fields)
    unknown = set(out).difference(INDEX_COLUMNS)
    if unknown:
        raise StorageError(f"unknown run index columns {sorted(unknown)}")
    for column in ("status", "agent"):
        value = out.get(column)
        problem = None if value is None else unstorable_text(value, name=column)
        if problem is not None:
            raise ConfigError(f"the run index cannot store this {problem}: {value!r}")
    if "detail" in out and out["detail"] is not None:
        out["detail"] = encode(out["detail"])
    return out


def parse_cursor(cursor: str) -> tuple[int, str]:
    """A ``list_runs`` page cursor (``created_ms:run_id``) as its two parts."""
    created, sep, run_id = cursor.partition(":")
    if not sep or not created.isdigit():
        raise ConfigError(f"invalid page cursor {cursor!r}")
    return int(created), run_id


def ttl_ms(ttl: float) -> int:
    """A lease's ttl in whole milliseconds (at least 1); ``ConfigError`` unless it is positive."""
    if not ttl > 0:
        raise ConfigError(f"a lease's ttl is a positive number of seconds, not {ttl!r}")
    return max(1, round(ttl * 1000))


def written_ahead(run_id: str, key: str, taken: str) -> StorageError:
    """The failure of an append whose record or one written ahead with it (``taken``) is in
    the journal already."""
    return StorageError(
        f"run {run_id!r}: {taken!r}, written ahead with {key!r}, is in the journal already: "
        "another writer drove this run; nothing of this append was committed",
        run_id=run_id,
    )


def appended(
    outcome: tuple[Any, ...],
    run_id: str,
    key: str,
    payload: Any,
    before: Sequence[Entry],
    release: bool = False,
) -> Appended:
    """An append's result from a batch's outcome: ``(won, watched, seq, kind, codec, text,
    created_ms)``, or ``(False, watched, guard)`` when the record under ``guard`` refused it.
    The records written ahead took the seqs just before the record's own; the lease was
    released with it (``release``) unless it was refused."""
    if len(outcome) == 3:
        return Appended(False, None, outcome[1], outcome[2])
    won, watched, seq, kind, codec, text, created_ms = outcome
    value = payload if won else decode(codec, text, run_id=run_id, key=key)
    first = seq - len(before)
    ahead = tuple(
        Record(first + i, run_id, e.key, e.kind, e.payload, created_ms, codec)
        for i, e in enumerate(before)
    )
    return Appended(
        won,
        Record(seq, run_id, key, kind, value, created_ms, codec),
        watched,
        before=ahead,
        released=release,
    )
