"""One batch of journal writes, applied set-wise inside the writer's open transaction.

Pure apart from its connection: ``apply(conn, ops, now, limit)`` decides each op's outcome as if
the ops ran one by one in order, and is tested without threads. The SQL is built from the
tables' names in ``names``, which a test holds to the Core schema, so the writer (on the
standard-library driver, for speed) cannot drift from the schema.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runtime.errors import FormatError, LeaseLost, StorageError
from runtime.ownership import Owner
from runtime.store import names
from runtime.store.protocol import written_ahead
from runtime.store.sqlite.leases import LeaseOp, LeaseRow, decide, read_leases, write_leases
from runtime.store.sqlite.setup import check_format

__all__ = [
    "AppendOp",
    "CreateOp",
    "Failed",
    "IndexOp",
    "LeaseOp",
    "Op",
    "apply",
    "chunk_rows",
    "insert_records_sql",
    "probe_sql",
    "touch_runs_sql",
]

# A batch's rows go into a few
# multi-row statements whose row counts are powers of two (a short list is padded by repeating
# its last row, which changes nothing), so the connection's statement cache stays small.
_R, _U = names.records.name, names.runs.name
_RECORD_COLUMNS = ("seq", "run_id", "key", "kind", "codec", "payload", "created_ms")
INDEX_COLUMNS = names.INDEX_COLUMNS

UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)
"""SQLite understands ``UPDATE ... FROM`` (older versions take a slower correlated update)."""


def _rows(width: int, n: int) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return ", ".join([row] * n)


@functools.cache
def probe_sql(n: int) -> str:
    """The records under ``n`` (run_id, key) pairs, and first a row holding only max(seq)."""
    columns = ", ".join(f"r.{c}" for c in _RECORD_COLUMNS)
    # CROSS JOIN keeps the probe list as the outer loop: one unique-index search per pair.
    return (
        f"SELECT max(seq), NULL, NULL, NULL, NULL, NULL, NULL FROM {_R} UNION ALL "
        f"SELECT {columns} FROM (VALUES {_rows(2, n)}) AS p "
        f"CROSS JOIN {_R} AS r ON r.run_id = p.column1 AND r.key = p.column2"
    )


@functools.cache
def insert_records_sql(n: int) -> str:
    # DO NOTHING only ever meets padding: the probe, under the write lock, decided the winners,
    # and the writer checks that every row it meant to insert was inserted.
    return (
        f"INSERT INTO {_R} ({', '.join(_RECORD_COLUMNS)}) VALUES {_rows(7, n)} "
        "ON CONFLICT DO NOTHING"
    )


@functools.cache
def insert_runs_sql(n: int) -> str:
    return (
        f"INSERT INTO {_U} (run_id, format, created_ms, updated_ms, status, agent, turns) "
        f"VALUES {_rows(7, n)} ON CONFLICT (run_id) DO NOTHING"
    )


@functools.cache
def touch_runs_sql(n: int) -> str:
    return f"UPDATE {_U} SET updated_ms = ? WHERE run_id IN ({', '.join('?' * n)})"


@functools.cache
def update_runs_sql(n: int, update_from: bool) -> str:
    """Set the index columns whose bit is in ``m`` and ``updated_ms``, for ``n`` runs."""
    values = f"WITH v(run_id, m, {', '.join(INDEX_COLUMNS)}) AS (VALUES {_rows(6, n)}) "
    if update_from:
        sets = ", ".join(
            f"{c} = CASE WHEN v.m & {1 << i} THEN v.{c} ELSE {_U}.{c} END"
            for i, c in enumerate(INDEX_COLUMNS)
        )
        return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? FROM v WHERE {_U}.run_id = v.run_id"
    this = f"FROM v WHERE v.run_id = {_U}.run_id"
    sets = ", ".join(
        f"{c} = CASE WHEN (SELECT v.m & {1 << i} {this}) THEN (SELECT v.{c} {this}) ELSE {c} END"
        for i, c in enumerate(INDEX_COLUMNS)
    )
    return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? WHERE run_id IN (SELECT run_id FROM v)"


Row = tuple[int, str, str, str, int]
"""A record as the writer reads it: seq, kind, codec, payload text, created_ms.

An append's outcome is ``(won, watched, *row)``, or ``(False, watched, key)`` when the record
under ``key``, one of its ``unless`` keys, refused it."""


@dataclass(slots=True)
class AppendOp:
    """Insert one record unless its key exists; report the winner and whether ``watch`` exists."""

    run_id: str
    key: str
    kind: str
    codec: str
    payload: str
    unless: tuple[str, ...] | None = None
    """If a record under one of these keys exists in the run, insert nothing (a cancel or end
    guard)."""
    watch: str | None = None
    """Report whether a record under this key exists, read inside the same transaction."""
    check_header: bool = False
    index: dict[str, Any] | None = None
    epoch: int | None = None
    """Refuse the append (``LeaseLost``) unless the run's lease has this epoch."""
    before: tuple[tuple[str, str, str], ...] = ()
    """Records (key, kind, payload text) to insert first, all of them and this one or none."""
    release: bool = False
    """Release the run's lease (of ``epoch``) in the same transaction, unless refused."""


@dataclass(slots=True)
class CreateOp:
    """Write a run's header record and its index row, unless the run exists."""

    run_id: str
    header: str
    agent: str | None
    epoch: int | None = None
    status: str = "running"


@dataclass(slots=True)
class IndexOp:
    """Update a run's row in the derived index (never a record)."""

    run_id: str
    fields: dict[str, Any]
    unless: str | None = None
    """If a record under this key exists in the run, change nothing (an ended run keeps the
    status its end marker gave it, whatever a slower driver concludes)."""
    epoch: int | None = None


Op = AppendOp | CreateOp | IndexOp | LeaseOp


class Failed:
    """One op's own failure inside a batch that otherwise commits (an unknown run format)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


MAX_CHUNK = 256
"""Rows per multi-row statement at most (fewer if the host allows fewer parameters). A prepared
1,024-row insert holds ~1.3 MB in the statement cache; 256 rows keep the cache near 1 MB in all
for a few more statements per large batch."""

_MASK = {c: 1 << i for i, c in enumerate(INDEX_COLUMNS)}


@functools.cache
def chunk_rows(limit: int, width: int) -> int:
    """The largest power of two of rows of ``width`` values that fits ``limit`` parameters."""
    rows = 1
    while rows * 2 * width + 1 <= limit and rows < MAX_CHUNK:
        rows *= 2
    return rows


def apply(
    conn: sqlite3.Connection, ops: list[Op], now: int, limit: int, clock: int | None = None
) -> list[Any]:
    """Apply a batch inside the open transaction, as if its ops ran one by one in order.

    ``now`` (wall-clock ms) times the records it writes, for people to read; ``clock`` (the
    journal's clock, ``leases.now_ms``; default ``now``) is what the lease ops are decided on.

    One probe reads every key the batch inserts, guards on or watches, and the highest seq;
    each op's outcome is then decided here, in order, from what existed before the batch and
    what earlier ops of it inserted; the winners are inserted with the next seqs (the write lock
    is held, so nothing comes between the probe and the inserts); each touched run's index row
    is updated once. This loop runs once per record while the event loop competes for the GIL:
    it is written for speed (flat parameter lists, no per-row helpers).
    """
    wanted: dict[tuple[str, str], None] = {}
    fenced: list[str] = []
    for op in ops:
        if type(op) is LeaseOp or op.epoch is not None:
            fenced.append(op.run_id)
        if type(op) is AppendOp:
            run_id = op.run_id
            wanted[run_id, op.key] = None
            if op.unless is not None:
                for guard in op.unless:
                    wanted[run_id, guard] = None
            if op.watch is not None:
                wanted[run_id, op.watch] = None
            if op.check_header:
                wanted[run_id, "header"] = None
            for entry in op.before:
                wanted[run_id, entry[0]] = None
        elif type(op) is CreateOp:
            wanted[op.run_id, "header"] = None
        elif type(op) is IndexOp and op.unless is not None:
            wanted[op.run_id, op.unless] = None
    present: dict[tuple[str, str], Row] = {}
    seq = 0
    probes = [v for pair in wanted for v in pair] or ["", ""]
    for part in _padded(probes, 2, chunk_rows(limit, 2)):
        for found in conn.execute(probe_sql(len(part) // 2), part):
            if found[1] is None:
                seq = found[0] or 0
            else:
                present[found[1], found[2]] = (found[0], *found[3:])
    leases = read_leases(conn, fenced, limit) if fenced else {}
    dirty: set[str] = set()
    inserts: list[Any] = []  # flat: seven values per record
    created: list[Any] = []  # flat: seven values per run
    index: dict[str, dict[str, Any]] = {}
    outcomes: list[Any] = []
    outcome = outcomes.append
    if clock is None:
        clock = now
    for op in ops:
        if type(op) is LeaseOp:
            outcome(decide(op, leases, dirty, clock))
            continue
        if op.epoch is not None:
            held = leases.get(op.run_id)
            if held is None or held[0] != op.epoch:
                outcome(Failed(_lost(op.run_id, op.epoch, held)))
                continue
        if type(op) is AppendOp:
            run_id = op.run_id
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
                    watched = op.watch is not None and (run_id, op.watch) in present
                    outcome((False, watched, refused))
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
                key, kind, codec, payload = op.key, op.kind, op.codec, op.payload
                record = present[k] = (seq, kind, codec, payload, now)
                inserts += (seq, run_id, key, kind, codec, payload, now)
            fields = index.get(run_id)
            if fields is None:
                fields = index[run_id] = {}
            if op.index:
                fields.update(op.index)
            if op.release:  # fenced by its epoch above: the lease is this op's to release
                decide(LeaseOp("release", run_id, op.epoch), leases, dirty, clock)
            # Flat and atomic, so the collector stops tracking it at its first look.
            outcome((won, op.watch is not None and (run_id, op.watch) in present, *record))
        elif type(op) is CreateOp:
            run_id = op.run_id
            k = (run_id, "header")
            header = present.get(k)
            if header is None:
                seq += 1
                present[k] = (seq, "header", "json", op.header, now)
                inserts += (seq, run_id, "header", "header", "json", op.header, now)
                created += (run_id, names.FORMAT_VERSION, now, now, op.status, op.agent, 0)
                outcome(True)
                continue
            try:
                check_format(run_id, header[3])
            except FormatError as exc:
                outcome(Failed(exc))
                continue
            outcome(False)
        else:
            assert isinstance(op, IndexOp)
            unknown = set(op.fields).difference(INDEX_COLUMNS)
            if unknown:
                outcome(Failed(StorageError(f"unknown run index columns {sorted(unknown)}")))
                continue
            if op.unless is None or (op.run_id, op.unless) not in present:
                index.setdefault(op.run_id, {}).update(op.fields)
            outcome(None)
    if inserts:
        before = conn.total_changes
        for part in _padded(inserts, 7, chunk_rows(limit, 7)):
            conn.execute(insert_records_sql(len(part) // 7), part)
        if conn.total_changes - before != len(inserts) // 7:
            raise StorageError("the journal changed under the write lock; nothing was committed")
    for part in _padded(created, 7, chunk_rows(limit, 7)):
        conn.execute(insert_runs_sql(len(part) // 7), part)
    if index:
        _update_runs(conn, index, now, limit)
    if dirty:
        write_leases(conn, leases, dirty)
    return outcomes


def _lost(run_id: str, epoch: int | None, held: LeaseRow | None) -> LeaseLost:
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


def _update_runs(
    conn: sqlite3.Connection, index: dict[str, dict[str, Any]], now: int, limit: int
) -> None:
    """Set each touched run's changed index columns (the batch's last value) and updated_ms."""
    touched: list[Any] = []
    changed: list[Any] = []  # flat: run_id, mask of the columns set, then the four columns
    for run_id, fields in index.items():
        if not fields:
            touched.append(run_id)
            continue
        mask = 0
        for column in fields:
            mask |= _MASK[column]
        get = fields.get
        changed += (run_id, mask, get("status"), get("agent"), get("turns"), get("detail"))
    for part in _padded(touched, 1, chunk_rows(limit, 1)):
        conn.execute(touch_runs_sql(len(part)), [now, *part])
    # Without UPDATE ... FROM each row is found by a scan of the VALUES list: keep lists short.
    rows = chunk_rows(limit, 6) if UPDATE_FROM else min(chunk_rows(limit, 6), 64)
    for part in _padded(changed, 6, rows):
        part.append(now)
        conn.execute(update_runs_sql(len(part) // 6, UPDATE_FROM), part)


def _padded(values: list[Any], width: int, rows: int) -> Iterator[list[Any]]:
    """A flat list of rows of ``width`` values, as slices of at most ``rows`` rows whose row
    count is a power of two: the last slice repeats its last row to get there."""
    step = rows * width
    for i in range(0, len(values), step):
        part = values[i : i + step]
        n = len(part) // width
        size = 1
        while size < n:
            size *= 2
        part.extend(part[-width:] * (size - n))
        yield part
