"""The journal's rules, written once: what each op of a batch does, given what the store holds.

Every store applies a batch the same way: it reads, under its write lock, the records the batch
names (``wanted``), the leases of the runs it touches and the highest ``seq``; ``decide`` then
settles each op in order, as if the ops ran one by one (insert-if-absent keys, guards, watches,
epoch fencing, records written ahead, release with the end, the index row), and returns a
``Plan``; the store writes the plan (SQL on SQLite and PostgreSQL, dicts in memory). Nothing
here touches a database, so the rules are tested without one, and a third store keeps them by
construction.

Where the dialects differ the plan says so rather than hiding it: PostgreSQL decides its lease
ops in SQL before the rest of the batch (``judge`` is None there, and ``leases`` holds what its
probe read after them), and tells workers of the runs a batch made ``ready``; a run created in
the batch gets its index row whole in ``created``, apart from the updates of runs that existed.

``decide`` runs once per record on the SQLite writer's thread while the event loop competes for
the GIL: it is written flat, over tuples, with no per-op helpers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from runtime.errors import FormatError, LeaseLost, StorageError
from runtime.ownership import Owner
from runtime.store import names
from runtime.store.ops import AppendOp, CreateOp, Failed, IndexOp, LeaseOp, Op

__all__ = [
    "READY_STATUSES",
    "WAIT_STATUSES",
    "WAKE_KINDS",
    "Judge",
    "LeaseRow",
    "Plan",
    "Row",
    "check_format",
    "decide",
    "lease_lost",
    "wanted",
    "written_ahead",
]

Row = tuple[int, str, str, Any, int]
"""A record as a batch holds it: seq, kind, codec, payload, created_ms.

An append's outcome is ``(won, watched, *row)``, or ``(False, watched, key)`` when the record
under ``key``, one of its ``unless`` keys, refused it; a create's is whether it created the run;
an index update's is ``None``; a lease op's is ``Judge``'s; an op that failed on its own is
``Failed``."""

LeaseRow = tuple[int, str, str, int, int, bool]
"""A lease as a batch holds it: epoch, owner JSON, host, acquired_ms, expires_ms, released."""

Judge = Callable[[LeaseOp, dict[str, LeaseRow], set[str], int], Any]
"""The lease rule of a store that decides leases in Python (``leases.judge``)."""

READY_STATUSES = ("submitted", "running")
"""Index statuses of a run that a worker may drive, once nobody holds its lease."""

WAIT_STATUSES = ("waiting", "halted")
"""Index statuses of a run that stopped until something happens: a worker may drive it once
its ``due_ms`` has come, or once a record of a ``WAKE_KINDS`` kind was committed after it
stopped (its ``wake_seq``). The records decide, not the index status a verb sets: a person's
answer committed while the drive that asked was still writing "waiting" wakes the run all the
same."""

WAKE_KINDS = ("answer", "cancel", "decision", "result", "signal")
"""The kinds of record, written by someone other than the run's driver, that may unblock a
waiting or halted run: an answer, a cancel, an approval decision, a resolution or a
reconciler's finding (a result), a signal."""

INDEX_COLUMNS = names.INDEX_COLUMNS


class Plan:
    """What a batch does, as ``decide`` settled it; the store writes it.

    ``outcomes``: one per op, in order. ``inserts``: the records to insert, flat, seven values
    each (seq, run_id, key, kind, codec, payload, created_ms), seqs following the highest read.
    ``created``: the index rows of runs this batch creates (status, agent, turns, detail), final.
    ``index``: for runs that existed, the index columns the batch set (its last value of each;
    empty: only ``updated_ms`` moves). ``dirty``: runs whose lease row ``judge`` changed.
    ``releases``: run -> epoch, leases released with their appends (already in ``leases`` where
    ``judge`` decided them). ``ready``: runs the batch made ready to drive without holding their
    lease (a new unfenced run, a ready status set from outside the drive).
    """

    __slots__ = ("created", "dirty", "index", "inserts", "outcomes", "ready", "releases")

    def __init__(self) -> None:
        self.outcomes: list[Any] = []
        self.inserts: list[Any] = []
        self.created: dict[str, dict[str, Any]] = {}
        self.index: dict[str, dict[str, Any]] = {}
        self.dirty: set[str] = set()
        self.releases: dict[str, int] = {}
        self.ready: dict[str, None] = {}


def wanted(ops: Sequence[Op]) -> tuple[dict[tuple[str, str], None], dict[str, None]]:
    """What a batch must read before ``decide``: the (run, key) pairs it inserts, guards on,
    watches or checks the header of, in order; and the runs whose lease it is fenced by or
    changes."""
    keys: dict[tuple[str, str], None] = {}
    fenced: dict[str, None] = {}
    for op in ops:
        run_id = op.run_id
        if type(op) is LeaseOp:
            fenced[run_id] = None
            continue
        if op.epoch is not None:
            fenced[run_id] = None
        if type(op) is AppendOp:
            keys[run_id, op.key] = None
            if op.unless is not None:
                for guard in op.unless:
                    keys[run_id, guard] = None
            if op.watch is not None:
                keys[run_id, op.watch] = None
            if op.check_header:
                keys[run_id, "header"] = None
            for entry in op.before:
                keys[run_id, entry[0]] = None
        elif type(op) is CreateOp:
            keys[run_id, "header"] = None
        elif type(op) is IndexOp and op.unless is not None:
            keys[run_id, op.unless] = None
    return keys, fenced


def decide(
    ops: Sequence[Op],
    present: dict[tuple[str, str], Row],
    seq: int,
    now: int,
    leases: dict[str, LeaseRow],
    judge: Judge | None = None,
    clock: int | None = None,
    clock_id: str | None = None,
) -> Plan:
    """Settle a batch, in order, from what the store held before it (``present``: the records
    ``wanted`` named that exist; ``seq``: the highest; ``leases``: the rows of the fenced runs)
    and what its earlier ops did. ``present`` and ``leases`` are updated as the ops go.

    ``now`` (wall-clock ms) times the records, for people to read; lease ops are decided by
    ``judge`` on ``clock``, the journal's clock (default ``now``). A store without ``judge``
    (PostgreSQL) has applied its lease ops already and passes none here. ``clock_id`` names the
    journal's clock where it is not the store's own (this boot's, on SQLite), for ``due_ms``.

    An index status set by an op also sets the columns of a wait (``stopped``).
    """
    plan = Plan()
    outcome = plan.outcomes.append
    inserts = plan.inserts
    created = plan.created
    index = plan.index
    if clock is None:
        clock = now
    for op in ops:
        run_id = op.run_id
        if type(op) is LeaseOp:
            if judge is None:
                raise StorageError("a lease op reached a store that decides leases in SQL")
            outcome(judge(op, leases, plan.dirty, clock))
            continue
        if op.epoch is not None:
            held = leases.get(run_id)
            if held is None or held[0] != op.epoch:
                outcome(Failed(lease_lost(run_id, op.epoch, held)))
                continue
        if type(op) is AppendOp:
            if op.check_header:
                header = present.get((run_id, "header"))
                try:
                    check_format(run_id, None if header is None else header[3])
                except FormatError as exc:
                    outcome(Failed(exc))
                    continue
            if op.unless is not None:
                refused = next((g for g in op.unless if (run_id, g) in present), None)
                if refused is not None:
                    outcome(
                        (False, op.watch is not None and (run_id, op.watch) in present, refused)
                    )
                    continue
            k = (run_id, op.key)
            record = present.get(k)
            won = record is None
            if op.before:
                taken = next((e[0] for e in op.before if (run_id, e[0]) in present), None)
                if taken is not None or not won:
                    outcome(Failed(written_ahead(run_id, op.key, taken or op.key)))
                    continue
                for key, kind, payload in op.before:
                    seq += 1
                    present[run_id, key] = (seq, kind, op.codec, payload, now)
                    inserts += (seq, run_id, key, kind, op.codec, payload, now)
            if record is None:
                seq += 1
                kind, codec, payload = op.kind, op.codec, op.payload
                record = present[k] = (seq, kind, codec, payload, now)
                inserts += (seq, run_id, op.key, kind, codec, payload, now)
            fields = created.get(run_id)
            if fields is None:
                fields = index.get(run_id)
                if fields is None:
                    fields = index[run_id] = {}
            if op.index:
                fields.update(op.index)
                status = op.index.get("status")
                if status is not None:
                    stopped(fields, status, op.epoch, op.index, seq, clock_id)
                    if op.epoch is None and status in READY_STATUSES:
                        plan.ready[run_id] = None
            if op.release:  # fenced by its epoch above: the lease is this op's to release
                assert op.epoch is not None
                plan.releases[run_id] = op.epoch
                if judge is not None:
                    judge(LeaseOp("release", run_id, op.epoch), leases, plan.dirty, clock)
            # Flat and atomic, so the collector stops tracking it at its first look.
            outcome((won, op.watch is not None and (run_id, op.watch) in present, *record))
        elif type(op) is CreateOp:
            k = (run_id, "header")
            header = present.get(k)
            if header is None:
                seq += 1
                present[k] = (seq, "header", "json", op.header, now)
                inserts += (seq, run_id, "header", "header", "json", op.header, now)
                created[run_id] = {"status": "running", "agent": op.agent, "turns": 0}
                if op.epoch is None:
                    plan.ready[run_id] = None
                outcome(True)
                continue
            try:
                check_format(run_id, header[3])
            except FormatError as exc:
                outcome(Failed(exc))
                continue
            outcome(False)
        else:
            assert type(op) is IndexOp
            unknown = set(op.fields).difference(INDEX_COLUMNS)
            if unknown:
                outcome(Failed(StorageError(f"unknown run index columns {sorted(unknown)}")))
                continue
            if op.unless is None or (run_id, op.unless) not in present:
                fields = created.get(run_id)
                if fields is None:
                    fields = index.get(run_id)
                    if fields is None:
                        fields = index[run_id] = {}
                fields.update(op.fields)
                status = op.fields.get("status")
                if status is not None:
                    stopped(fields, status, op.epoch, op.fields, seq, clock_id)
                    if op.epoch is None and status in READY_STATUSES:
                        plan.ready[run_id] = None
            outcome(None)
    return plan


def stopped(
    fields: dict[str, Any],
    status: str,
    epoch: int | None,
    given: dict[str, Any],
    seq: int,
    clock_id: str | None,
) -> None:
    """The columns of a wait, set with an index status. A drive (its write fenced by its
    ``epoch``) that stops to wait or halts wakes on a record committed after the ``wake_seq`` it
    gives (by default ``seq``, the highest so far, this op's own included), or at the ``due_ms``
    it gives, on the clock ``clock_id`` names. A verb that sets such a status from outside the
    drive (a status read from records a moment ago, maybe stale) leaves them as the drive set
    them: it must not move a wake past a record it did not see. Any other status clears them."""
    if status not in WAIT_STATUSES:
        fields["due_ms"] = fields["due_clock"] = fields["wake_seq"] = None
    elif epoch is not None:
        due = fields["due_ms"] = given.get("due_ms")
        fields["due_clock"] = clock_id if due is not None else None
        wake = given.get("wake_seq")
        fields["wake_seq"] = seq if wake is None else min(wake, seq)
    else:
        for column in ("due_ms", "wake_seq"):  # not a verb's to move
            if column in given:
                raise StorageError(f"{column} is set by the drive that stops, with its epoch")


def check_format(run_id: str, header_payload: str | None) -> None:
    """Refuse a run whose header is missing or names a format this bide cannot read."""
    if header_payload is None:
        raise FormatError(f"run {run_id!r} has no header record", run_id=run_id)
    try:
        version = json.loads(header_payload).get("format")
    except (ValueError, AttributeError):
        version = None
    if version != names.FORMAT_VERSION:
        raise FormatError(
            f"run {run_id!r} is written in journal format {version!r}; this bide reads format "
            f"{names.FORMAT_VERSION} only (a newer bide wrote it?)",
            run_id=run_id,
        )


def lease_lost(run_id: str, epoch: int | None, held: LeaseRow | None) -> LeaseLost:
    """The refusal of a write fenced by ``epoch`` when the run's lease is ``held`` by another."""
    if held is None:
        holder = "it has no lease"
    else:
        try:
            who = Owner.from_json(held[1]).describe()
        except Exception:  # an unreadable owner must not hide the refusal
            who = "another owner"
        holder = f"{who} holds epoch {held[0]}"
    return LeaseLost(
        f"run {run_id!r}: this drive's lease (epoch {epoch}) was taken over ({holder}); "
        "it appends nothing more and runs no further tool",
        run_id=run_id,
    )


def written_ahead(run_id: str, key: str, taken: str) -> StorageError:
    """The failure of an append whose record or one written ahead with it (``taken``) is in
    the journal already."""
    return StorageError(
        f"run {run_id!r}: {taken!r}, written ahead with {key!r}, is in the journal already: "
        "another writer drove this run; nothing of this append was committed",
        run_id=run_id,
    )
