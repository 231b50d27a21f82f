"""The SQL of the SQLite store's reads, as text. They are SQLAlchemy Core selects over
``schema``'s tables compiled for SQLite, written out so that opening a journal does not import
SQLAlchemy; a test compiles the Core selects and holds every text here equal to its select."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["CLAIMABLE", "GET", "LEASE", "LIST", "LOAD", "LOAD_PREFIX", "ROW", "Query"]


@dataclass(frozen=True, slots=True)
class Query:
    """A select's SQL, its parameters' names in placeholder order, and the values of those
    the caller does not give (the constants of the select)."""

    sql: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def params(self, **values: Any) -> tuple[Any, ...]:
        return tuple(values[n] if n in values else self.defaults[n] for n in self.names)


GET = Query(
    "SELECT bide_records.seq, bide_records.kind, bide_records.codec, bide_records.payload, "
    "bide_records.created_ms \nFROM bide_records \n"
    'WHERE bide_records.run_id = ? AND bide_records."key" = ?',
    ("run_id", "key"),
)
LOAD = Query(
    'SELECT bide_records.seq, bide_records."key", bide_records.kind, bide_records.codec, '
    "bide_records.payload, bide_records.created_ms \nFROM bide_records \n"
    "WHERE bide_records.run_id = ? AND bide_records.seq > ? ORDER BY bide_records.seq",
    ("run_id", "after"),
)

LOAD_PREFIX = Query(
    'SELECT bide_records.seq, bide_records."key", bide_records.kind, bide_records.codec, '
    "bide_records.payload, bide_records.created_ms \nFROM bide_records \n"
    "WHERE bide_records.run_id = ? AND bide_records.seq > ? "
    'AND bide_records."key" >= ? AND bide_records."key" < ? ORDER BY bide_records.seq',
    ("run_id", "after", "low", "high"),
)
"""``LOAD`` of the keys in [low, high): a range on the (run_id, key) index (SQLite compares
text byte by byte), for the keys under a prefix."""

_LEASED = (
    "bide_leases.epoch, bide_leases.owner, bide_leases.acquired_ms, bide_leases.expires_ms, "
    "bide_leases.released"
)
_RUNS = "bide_runs LEFT OUTER JOIN bide_leases ON bide_leases.run_id = bide_runs.run_id"
_RUN_ROW = (
    "SELECT bide_runs.run_id, bide_runs.format, bide_runs.status, bide_runs.agent, "
    "bide_runs.turns, bide_runs.created_ms, bide_runs.updated_ms, bide_runs.detail, "
    f"{_LEASED} \nFROM {_RUNS}"
)
"""A run's row in the index with its lease, if any (``_run_row`` reads it)."""

ROW = Query(f"{_RUN_ROW} \nWHERE bide_runs.run_id = ?", ("run_id",))
LEASE = Query(f"SELECT {_LEASED} \nFROM bide_leases \nWHERE bide_leases.run_id = ?", ("run_id",))


def _list(status: bool, prefix: bool, before: bool) -> Query:
    where: list[str] = []
    names: list[str] = []
    if status:
        where.append("bide_runs.status = ?")
        names.append("status")
    if prefix:
        where.append("bide_runs.run_id LIKE ? ESCAPE '/'")
        names.append("pattern")
    if before:
        where.append("(bide_runs.created_ms, bide_runs.run_id) < (?, ?)")
        names += ["before_ms", "before_id"]
    sql = _RUN_ROW + (" \nWHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY bide_runs.created_ms DESC, bide_runs.run_id DESC\n LIMIT ? OFFSET ?"
    return Query(sql, (*names, "limit", "param_1"), MappingProxyType({"param_1": 0}))


LIST = {flags: _list(*flags) for flags in itertools.product((False, True), repeat=3)}
"""One listing per combination of filters: (status, prefix, before)."""

CLAIMABLE = Query(
    "SELECT bide_runs.run_id, bide_leases.epoch, bide_leases.owner, "
    "bide_leases.acquired_ms, bide_leases.expires_ms, bide_leases.released \nFROM "
    "bide_runs LEFT OUTER JOIN bide_leases ON bide_leases.run_id = bide_runs.run_id "
    "\nWHERE (bide_runs.status = ? OR bide_runs.status = ? OR (bide_runs.status = ? OR "
    "bide_runs.status = ?) AND (bide_runs.due_ms IS NOT NULL AND (bide_runs.due_ms <= "
    "? OR bide_runs.due_clock IS NOT ?) OR (EXISTS (SELECT * \nFROM bide_records "
    "\nWHERE bide_records.run_id = bide_runs.run_id AND bide_records.seq > "
    "coalesce(bide_runs.wake_seq, ?) AND (bide_records.kind = ? OR bide_records.kind "
    "= ? OR bide_records.kind = ? OR bide_records.kind = ? OR bide_records.kind = "
    "?))))) AND (bide_leases.run_id IS NULL OR bide_leases.released IS 1 OR "
    "bide_leases.expires_ms <= ? OR bide_leases.host = ? OR bide_leases.owner NOT "
    "LIKE ?) AND NOT (EXISTS (SELECT * \nFROM bide_queue_runs \nWHERE "
    "bide_queue_runs.run_id = bide_runs.run_id AND bide_queue_runs.started_ms IS NULL)) "
    # A queued run that never started is claimed through its queue (store.queues).
    "AND (? IS NULL OR bide_runs.agent = ?) "
    # A worker with an agent claims only the runs that agent started.
    "ORDER BY CASE WHEN (bide_leases.released IS 0 AND "
    "(bide_leases.expires_ms <= ? OR bide_leases.owner NOT LIKE ?)) THEN ? WHEN "
    "(bide_leases.run_id IS NULL OR bide_leases.released IS 1) THEN ? ELSE ? END, "
    "bide_runs.updated_ms, bide_runs.run_id\n LIMIT ? OFFSET ?",
    (
        "status_1",
        "status_2",
        "status_3",
        "status_4",
        "due_now",
        "clock",
        "coalesce_1",
        "kind_1",
        "kind_2",
        "kind_3",
        "kind_4",
        "kind_5",
        "now",
        "host",
        "boot",
        "agent",
        "agent2",
        "now2",
        "boot2",
        "param_1",
        "param_2",
        "param_3",
        "limit",
        "param_4",
    ),
    MappingProxyType(
        {
            "status_1": "running",
            "status_2": "submitted",
            "status_3": "waiting",
            "status_4": "halted",
            "coalesce_1": 0,
            "kind_1": "answer",
            "kind_2": "cancel",
            "kind_3": "decision",
            "kind_4": "result",
            "kind_5": "signal",
            "param_1": 0,
            "param_2": 1,
            "param_3": 2,
            "param_4": 0,
        }
    ),
)
"""Runs a worker may claim: running or submitted, or waiting or halted and woken (due on the
journal's clock ``due_now``, or due on another boot's clock than ``clock``, or a record that may
wake it committed after it stopped: ``decide.WAIT_STATUSES``); and unleased, released, expired,
timed on another boot's clock (``boot`` is the LIKE pattern of this boot's owners), or held by
a drive on this host (whose liveness the caller checks); given ``agent``, only the runs that
agent (by name) started. Orphans first (a lease nobody released
whose time ran out, or of another boot: its drive died), then runs nobody holds, then the live
leases of this host, which only a gone process's may be taken: a worker that finds those first
would find nothing else to claim. Then least recently updated."""
