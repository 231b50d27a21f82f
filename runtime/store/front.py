"""The store front: the ``Store`` calls as every store makes them, whatever holds the records.

``StoreFront`` checks each call at the boundary (``checks``), turns writes into ops
(``ops``) for the store's writer, turns the writer's outcomes back into ``Appended`` records,
and keeps the read rules (a run's header is checked before its records are decoded; pages of
runs newest first, with a cursor). A store supplies how an op is submitted and how rows are
fetched; ``JudgedLeases`` adds the lease calls of the stores whose leases ``leases.judge``
decides (SQLite, memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from runtime.errors import ConfigError
from runtime.ownership import Lease, Owner, boot_id, busy, lost
from runtime.records import CODEC, Appended, Entry, Record
from runtime.store import names
from runtime.store.checks import (
    check_appended,
    check_query,
    check_release,
    check_run_id,
    index_fields,
    parse_cursor,
    ttl_ms,
)
from runtime.store.codec import decode, encode
from runtime.store.decide import LeaseRow, Row, check_format
from runtime.store.leases import lease_of, now_ms, owner_text, wall_offset_ms
from runtime.store.ops import AppendOp, CreateOp, IndexOp, LeaseOp, Op
from runtime.store.protocol import RunPage, RunRow
from runtime.store.queues import clock_name

__all__ = ["HEADER", "JudgedLeases", "StoreFront", "appended", "like_prefix"]

HEADER = encode({"format": names.FORMAT_VERSION})
"""Every run's header record, as stored (the same for all runs of this format)."""


class StoreFront:
    """What every store does the same way; a store subclasses it and supplies ``_submit`` (hand
    one op to its writer; its outcome, or the op's own failure raised) and the ``_fetch_*``
    reads."""

    path: str

    def __init__(self) -> None:
        self._verified: set[str] = set()
        """Runs whose header this store has read or written: their records may be decoded."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- what a store supplies ---------------------------------------------------------------

    @property
    def clock_id(self) -> str | None:
        """Which clock ``clock_ms`` reads: this boot's (``ownership.boot_id``), whose times mean
        nothing on another boot; None where the clock is the wall clock (not Linux)."""
        return boot_id()

    async def _submit(self, op: Op) -> Any:
        raise NotImplementedError

    def _encode(self, payload: Any) -> Any:
        """A payload as the store keeps it."""
        return encode(payload)

    def _decode(self, codec: str, payload: Any, run_id: str, key: str, seq: int | None) -> Any:
        """A payload as the store kept it, as a value."""
        return decode(codec, payload, run_id=run_id, key=key, seq=seq)

    async def _fetch_record(self, run_id: str, key: str) -> Row | None:
        raise NotImplementedError

    async def _fetch_records(self, run_id: str, after: int, prefix: str | None) -> list[Record]:
        raise NotImplementedError

    async def _fetch_runs(
        self, status: str | None, prefix: str | None, limit: int, before: tuple[int, str] | None
    ) -> list[RunRow]:
        """Up to ``limit`` runs newest first (created_ms, then run id, descending): with that
        ``status``, run ids that start with ``prefix``, older than ``before`` (created_ms, run
        id)."""
        raise NotImplementedError

    async def _fetch_run(self, run_id: str) -> RunRow | None:
        raise NotImplementedError

    # --- writes ------------------------------------------------------------------------------

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        """Write the run's header (format version) unless the run exists; True if it is new.

        An existing run written in another format is refused with ``FormatError``.
        """
        check_run_id(run_id)
        if agent is not None:
            index_fields({"agent": agent})
        created = bool(await self._submit(CreateOp(run_id, HEADER, agent, epoch)))
        self._verified.add(run_id)
        return created

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
    ) -> Appended:
        """Insert ``payload`` under ``key`` unless the key exists; return the winner (the
        contract is ``Store.append``'s, ``before`` and ``release`` included)."""
        check_release(release, epoch)
        check_appended(run_id, key, kind, unless, watch, before)
        encoded = self._encode
        op = AppendOp(
            run_id,
            key,
            kind,
            CODEC,
            encoded(payload),
            unless=(unless,) if isinstance(unless, str) else unless,
            watch=watch,
            check_header=run_id not in self._verified,
            index=index_fields(index) if index else None,
            epoch=epoch,
            before=tuple((e.key, e.kind, encoded(e.payload)) for e in before),
            release=release,
        )
        outcome = await self._submit(op)
        self._verified.add(run_id)
        return appended(outcome, run_id, key, payload, before, release, self._decode)

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None:
        """Update the run's listing row (status, agent, turns, detail). Never touches a record.

        ``unless`` names a key whose record, if present, leaves the row as it is (checked in
        the same transaction).
        """
        await self._submit(IndexOp(run_id, index_fields(fields), unless, epoch))

    # --- reads -------------------------------------------------------------------------------

    async def get(self, run_id: str, key: str) -> Record | None:
        check_query(run_id=run_id, key=key)
        row = await self._fetch_record(run_id, key)
        if row is None:
            return None
        if run_id not in self._verified and key != "header":
            await self.check_run(run_id)
        seq, kind, codec, payload, created_ms = row
        value = self._decode(codec, payload, run_id, key, seq)
        return Record(seq, run_id, key, kind, value, created_ms, codec)

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        check_query(run_id=run_id)
        row = await self._fetch_record(run_id, "header")
        if row is None:
            return False
        check_format(run_id, row[3])
        self._verified.add(run_id)
        return True

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        """The run's records in commit order, those with ``seq > after`` only if given, and
        those whose keys start with ``prefix`` only if given.

        The header is checked before any other record is decoded: a run in an unknown format
        raises ``FormatError`` and nothing of it is returned; so does a damaged record, with
        ``CorruptJournal``.
        """
        if prefix is not None:
            if not prefix:
                raise ConfigError("a key prefix is a non-empty string")
            check_query(prefix=prefix)
        if run_id not in self._verified and not await self.check_run(run_id):
            return []
        return await self._fetch_records(run_id, after, prefix)

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        """Runs newest first, filtered by index status and run-id prefix, one page at a time."""
        check_query(status=status, prefix=prefix, cursor=before)
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        after = None if before is None else parse_cursor(before)
        rows = await self._fetch_runs(status, prefix or None, limit + 1, after)
        runs = rows[:limit]
        cursor = None
        if len(rows) > limit:
            last = runs[-1]
            cursor = f"{last.created_ms}:{last.run_id}"
        return RunPage(runs, cursor)

    async def run_row(self, run_id: str) -> RunRow | None:
        """The run's row in the index, if the run exists."""
        check_query(run_id=run_id)
        return await self._fetch_run(run_id)


class JudgedLeases:
    """The lease calls of a store whose writer decides lease ops with ``leases.judge``: an op's
    outcome is ``(done, row, now)``, its lease read by ``leases.lease_of``."""

    # --- queues (``store.queues``), on this host's boot clock -------------------------------

    def _owner_text(self, owner: Owner) -> str:
        return owner_text(owner)

    def _claimed(self, run_id: str, payload: Any, owner: Owner | None) -> Lease:
        row, now = payload
        return lease_of(run_id, row, now, owner)

    async def _queue_clock(self) -> tuple[int, str]:
        return now_ms(), clock_name()

    async def slot_clock_ms(self) -> int:
        """The journal's clock as wall-clock ms: the boot clock plus the wall time at boot."""
        now = now_ms()
        return now + wall_offset_ms(now)

    async def _submit(self, op: Op) -> Any:
        raise NotImplementedError

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        """The run's lease for ``owner``, or ``RunBusy`` naming the live holder."""
        check_run_id(run_id)
        op = LeaseOp("acquire", run_id, take_over, owner_text(owner), owner.host, ttl_ms(ttl))
        granted, row, now = await self._submit(op)
        if not granted:
            raise busy(lease_of(run_id, row, now))
        return lease_of(run_id, row, now, owner)

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` from now; ``LeaseLost`` if it expired or another owner
        took it."""
        op = LeaseOp("renew", lease.run_id, lease.epoch, ttl_ms=ttl_ms(ttl))
        renewed, row, now = await self._submit(op)
        if not renewed:
            raise lost(lease, None if row is None else row[0])
        return lease_of(lease.run_id, row, now, lease.owner)

    async def release(self, lease: Lease) -> bool:
        """Release ``lease``; False (nothing changed) if another owner holds the run now."""
        released, _row, _now = await self._submit(LeaseOp("release", lease.run_id, lease.epoch))
        return bool(released)


def like_prefix(prefix: str) -> str:
    """A ``LIKE`` pattern (escape character ``/``) matching the run ids that start with
    ``prefix``."""
    return prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


def lease_row(epoch: int, owner: str, acquired_ms: int, expires_ms: int, released: Any) -> LeaseRow:
    """A lease row from a read, which does not select the host."""
    return (epoch, owner, "", acquired_ms, expires_ms, bool(released))


def appended(
    outcome: tuple[Any, ...],
    run_id: str,
    key: str,
    payload: Any,
    before: Sequence[Entry],
    release: bool,
    decoded: Any,
) -> Appended:
    """An append's result from its outcome (``decide.Row``): ``(won, watched, seq, kind, codec,
    payload, created_ms)``, or ``(False, watched, guard)`` when the record under ``guard``
    refused it. A record that another writer won is read back with ``decoded`` (the store's
    ``_decode``). The records written ahead took the seqs just before the record's own; the
    lease was released with it (``release``) unless it was refused."""
    if len(outcome) == 3:
        return Appended(False, None, outcome[1], outcome[2])
    won, watched, seq, kind, codec, text, created_ms = outcome
    value = payload if won else decoded(codec, text, run_id, key, None)
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
