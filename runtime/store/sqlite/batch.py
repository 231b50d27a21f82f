"""One batch of journal writes on SQLite, applied set-wise inside the writer's open transaction.

``apply(conn, ops, now, limit)`` reads what ``decide`` needs, lets it settle each op as if the
ops ran one by one in order, and writes its plan; it is tested without threads. The SQL is
built from the
tables' names in ``names``, which a test holds to the Core schema, so the writer (on the
standard-library driver, for speed) cannot drift from the schema.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from typing import Any, cast

from runtime.errors import StorageError
from runtime.ownership import boot_id
from runtime.store import names
from runtime.store.decide import Row, decide, wanted
from runtime.store.leases import judge
from runtime.store.ops import Op
from runtime.store.queues import QueueOp, with_queue_ops
from runtime.store.sqlite.leases import read_leases, write_leases
from runtime.store.sqlite.queues import apply_queue_ops

__all__ = [
    "apply",
    "chunk_rows",
    "insert_records_sql",
    "probe_sql",
    "touch_runs_sql",
    "update_stop_sql",
]

# A batch's rows go into a few
# multi-row statements whose row counts are powers of two (a short list is padded by repeating
# its last row, which changes nothing), so the connection's statement cache stays small.
_R, _U = names.records.name, names.runs.name
_RECORD_COLUMNS = ("seq", "run_id", "key", "kind", "codec", "payload", "created_ms")
INDEX_COLUMNS = names.INDEX_COLUMNS + names.WAKE_COLUMNS
"""The index columns a batch sets: those its callers name, and those of a wait (``decide``)."""
_RUN_COLUMNS = ("run_id", "format", "created_ms", "updated_ms", *INDEX_COLUMNS)
_WIDTH = 2 + len(INDEX_COLUMNS)
"""Values per row of an index update: the run, the mask of the columns set, each column."""
_STOP_COLUMNS = ("status", "due_ms", "due_clock", "wake_seq")
"""The indexed columns a status sets (``decide.stopped``): written by a statement of their own
(``update_stop_sql``), and only where one changes."""
_STOP_WIDTH = 2 + len(_STOP_COLUMNS)

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
        f"INSERT INTO {_U} ({', '.join(_RUN_COLUMNS)}) "
        f"VALUES {_rows(len(_RUN_COLUMNS), n)} ON CONFLICT (run_id) DO NOTHING"
    )


@functools.cache
def touch_runs_sql(n: int) -> str:
    return f"UPDATE {_U} SET updated_ms = ? WHERE run_id IN ({', '.join('?' * n)})"


@functools.cache
def update_runs_sql(n: int, update_from: bool) -> str:
    """Set the index columns whose bit is in ``m`` and ``updated_ms``, for ``n`` runs; with
    ``update_from``, all but the status and the wait's columns (``update_stop_sql``)."""
    values = f"WITH v(run_id, m, {', '.join(INDEX_COLUMNS)}) AS (VALUES {_rows(_WIDTH, n)}) "
    if update_from:
        sets = ", ".join(
            f"{c} = CASE WHEN v.m & {1 << i} THEN v.{c} ELSE {_U}.{c} END"
            for i, c in enumerate(INDEX_COLUMNS)
            if c not in _STOP_COLUMNS
        )
        return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? FROM v WHERE {_U}.run_id = v.run_id"
    this = f"FROM v WHERE v.run_id = {_U}.run_id"
    sets = ", ".join(
        f"{c} = CASE WHEN (SELECT v.m & {1 << i} {this}) THEN (SELECT v.{c} {this}) ELSE {c} END"
        for i, c in enumerate(INDEX_COLUMNS)
    )
    return f"{values}UPDATE {_U} SET {sets}, updated_ms = ? WHERE run_id IN (SELECT run_id FROM v)"


@functools.cache
def update_stop_sql(n: int) -> str:
    """Set the status and the wait's columns of ``n`` runs (those whose bit is in ``m``), only
    where one of them changes.

    An UPDATE that names an indexed column rewrites its index entries even when the value is
    the same: a page more in the WAL, written and synced, on every step of a run (each turn
    says the run is running)."""
    new = {c: f"CASE WHEN v.m & {_MASK[c]} THEN v.{c} ELSE {_U}.{c} END" for c in _STOP_COLUMNS}
    sets = ", ".join(f"{c} = {new[c]}" for c in _STOP_COLUMNS)
    same = " AND ".join(f"{_U}.{c} IS {new[c]}" for c in _STOP_COLUMNS)
    return (
        f"WITH v(run_id, m, {', '.join(_STOP_COLUMNS)}) AS (VALUES {_rows(_STOP_WIDTH, n)}) "
        f"UPDATE {_U} SET {sets} FROM v WHERE {_U}.run_id = v.run_id AND NOT ({same})"
    )


MAX_CHUNK = 256
"""Rows per multi-row statement at most (fewer if the host allows fewer parameters). A prepared
1,024-row insert holds ~1.3 MB in the statement cache; 256 rows keep the cache near 1 MB in all
for a few more statements per large batch."""

_MASK = {c: 1 << i for i, c in enumerate(INDEX_COLUMNS)}
_STOPS = sum(_MASK[c] for c in _STOP_COLUMNS)


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

    One probe reads every key the batch names and the highest seq, and one select the leases of
    the runs it is fenced by; ``decide`` settles each op; the winners are inserted with the
    next seqs (the write lock is held, so nothing comes between the probe and the inserts), the
    new runs' index rows inserted whole and each other touched run's row updated once.
    """
    if any(type(op) is QueueOp for op in cast("list[Any]", ops)):  # store.queues: those first
        at = now if clock is None else clock
        return with_queue_ops(
            ops,
            lambda queued: apply_queue_ops(conn, queued, at, now, limit),
            lambda rest: apply(conn, rest, now, limit, clock),
        )
    keys, fenced = wanted(ops)
    present: dict[tuple[str, str], Row] = {}
    seq = 0
    probes = [v for pair in keys for v in pair] or ["", ""]
    for part in _padded(probes, 2, chunk_rows(limit, 2)):
        for found in conn.execute(probe_sql(len(part) // 2), part):
            if found[1] is None:
                seq = found[0] or 0
            else:
                present[found[1], found[2]] = (found[0], *found[3:])
    leases = read_leases(conn, fenced, limit) if fenced else {}
    plan = decide(ops, present, seq, now, leases, judge, clock, boot_id())
    inserts = plan.inserts
    if inserts:
        before = conn.total_changes
        for part in _padded(inserts, 7, chunk_rows(limit, 7)):
            conn.execute(insert_records_sql(len(part) // 7), part)
        if conn.total_changes - before != len(inserts) // 7:
            raise StorageError("the journal changed under the write lock; nothing was committed")
    if plan.created:
        width = len(_RUN_COLUMNS)
        created: list[Any] = []  # flat: a value per column, per run
        for run_id, row in plan.created.items():
            get = row.get
            created += (run_id, names.FORMAT_VERSION, now, now)
            created += (get("status"), get("agent"), get("turns") or 0)
            created += [get(c) for c in INDEX_COLUMNS[3:]]
        for part in _padded(created, width, chunk_rows(limit, width)):
            conn.execute(insert_runs_sql(len(part) // width), part)
    if plan.index:
        _update_runs(conn, plan.index, now, limit)
    if plan.dirty:
        write_leases(conn, leases, plan.dirty)
    return plan.outcomes


def _update_runs(
    conn: sqlite3.Connection, index: dict[str, dict[str, Any]], now: int, limit: int
) -> None:
    """Set each touched run's changed index columns (the batch's last value) and updated_ms."""
    touched: list[Any] = []
    changed: list[Any] = []  # flat: run_id, mask of the columns set, then each column
    stops: list[Any] = []  # flat: run_id, mask, then the status and the wait's columns
    for run_id, fields in index.items():
        if not fields:
            touched.append(run_id)
            continue
        mask = 0
        for column in fields:
            mask |= _MASK[column]
        get = fields.get
        changed += (run_id, mask)
        changed += [get(c) for c in INDEX_COLUMNS]
        if UPDATE_FROM and mask & _STOPS:
            stops += (run_id, mask)
            stops += [get(c) for c in _STOP_COLUMNS]
    for part in _padded(touched, 1, chunk_rows(limit, 1)):
        conn.execute(touch_runs_sql(len(part)), [now, *part])
    # Without UPDATE ... FROM each row is found by a scan of the VALUES list: keep lists short.
    rows = chunk_rows(limit, _WIDTH) if UPDATE_FROM else min(chunk_rows(limit, _WIDTH), 64)
    for part in _padded(changed, _WIDTH, rows):
        part.append(now)
        conn.execute(update_runs_sql(len(part) // _WIDTH, UPDATE_FROM), part)
    for part in _padded(stops, _STOP_WIDTH, chunk_rows(limit, _STOP_WIDTH)):
        conn.execute(update_stop_sql(len(part) // _STOP_WIDTH), part)


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
