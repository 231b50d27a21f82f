"""What a store's writer is asked to do: the ops of one batch, the same for every store.

A store front (``front.StoreFront``) makes them from the ``Store`` calls; a writer gathers them
into batches; ``decide.decide`` says what each one does; each store's SQL (or, in memory, its
dicts) carries out the plan. Ops are plain slotted records: a batch may hold a thousand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AppendOp", "CreateOp", "DataOp", "Failed", "IndexOp", "LeaseOp", "Op"]


@dataclass(slots=True)
class AppendOp:
    """Insert one record unless its key exists; report the winner and whether ``watch`` exists."""

    run_id: str
    key: str
    kind: str
    codec: str
    payload: Any
    """The record's payload as the store keeps it (encoded text; in memory, maybe the object)."""
    unless: tuple[str, ...] | None = None
    """If a record under one of these keys exists in the run, insert nothing (a cancel or end
    guard)."""
    watch: str | None = None
    """Report whether a record under this key exists, read inside the same transaction."""
    check_header: bool = False
    """Check the run's header first (a run this store has not read or written yet)."""
    index: dict[str, Any] | None = None
    """Index columns to set in the same transaction (``checks.index_fields``)."""
    epoch: int | None = None
    """Refuse the append (``LeaseLost``) unless the run's lease has this epoch."""
    before: tuple[tuple[str, str, Any], ...] = ()
    """Records (key, kind, payload) to insert first, all of them and this one or none."""
    release: bool = False
    """Release the run's lease (of ``epoch``) in the same transaction, unless refused."""


@dataclass(slots=True)
class CreateOp:
    """Write a run's header record and its index row, unless the run exists."""

    run_id: str
    header: str
    agent: str | None
    epoch: int | None = None


@dataclass(slots=True)
class IndexOp:
    """Update a run's row in the derived index (never a record)."""

    run_id: str
    fields: dict[str, Any]
    unless: str | None = None
    """If a record under this key exists in the run, change nothing (an ended run keeps the
    status its end marker gave it, whatever a slower driver concludes)."""
    epoch: int | None = None


@dataclass(slots=True)
class LeaseOp:
    """Acquire, renew or release one run's lease.

    Where leases are decided in Python (``leases.judge``: SQLite, memory) the outcome is
    ``(done, row, now)``: for ``acquire``, granted, and the new lease's row or the holder's; for
    ``renew``, renewed, and the row (None if the run has no lease); for ``release``, released.
    PostgreSQL decides them in SQL (``postgres.leases``).
    """

    action: Literal["acquire", "renew", "release"]
    run_id: str
    epoch: int | None = None
    """renew, release: the epoch held. acquire: the epoch to take over (its holder is gone)."""
    owner: str = ""
    """acquire: the owner's JSON, as the store keeps it."""
    host: str = ""
    ttl_ms: int = 0


DataOp = AppendOp | CreateOp | IndexOp
Op = DataOp | LeaseOp


class Failed:
    """One op's own failure inside a batch that otherwise commits (an unknown run format, a
    lost lease, records written ahead that another writer wrote): its caller gets ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error
