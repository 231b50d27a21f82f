"""The journal's table and column names and the versions it carries, without SQLAlchemy: what
the SQLite writer and readers build their SQL from. ``schema`` defines its tables with them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FORMAT_VERSION",
    "HEAD_REVISION",
    "INDEX_COLUMNS",
    "VERSION_TABLE",
    "WAKE_COLUMNS",
    "TableNames",
    "leases",
    "queue_runs",
    "queues",
    "records",
    "runs",
    "schedules",
]

FORMAT_VERSION = 1
"""The journal format of a run, written in its header record. A reader refuses any other."""

HEAD_REVISION = "0004"
"""The schema revision this bide needs: the newest Alembic revision it ships."""

VERSION_TABLE = "bide_alembic_version"

INDEX_COLUMNS = ("status", "agent", "turns", "detail", "due_ms", "wake_seq")
"""The columns of ``bide_runs`` a writer may set (``update_index``, ``append(index=)``): a
drive that stops to wait gives when it is due and the ``seq`` through which it saw its run."""

WAKE_COLUMNS = ("due_clock",)
"""The columns of ``bide_runs`` the store sets itself when a run stops to wait (``decide``):
the clock ``due_ms`` is on."""


@dataclass(frozen=True, slots=True)
class TableNames:
    """A table's name and its columns' names, in the order ``schema`` declares them."""

    name: str
    columns: tuple[str, ...]


records = TableNames(
    "bide_records", ("seq", "run_id", "key", "kind", "codec", "payload", "created_ms")
)
runs = TableNames(
    "bide_runs",
    (
        "run_id",
        "format",
        "created_ms",
        "updated_ms",
        "status",
        "agent",
        "turns",
        "detail",
        "due_ms",
        "due_clock",
        "wake_seq",
    ),
)
leases = TableNames(
    "bide_leases",
    ("run_id", "epoch", "owner", "host", "acquired_ms", "expires_ms", "released"),
)
queues = TableNames(
    "bide_queues", ("name", "concurrency", "key_concurrency", "rate", "period_ms", "updated_ms")
)
queue_runs = TableNames(
    "bide_queue_runs",
    (
        "run_id",
        "queue",
        "ckey",
        "priority",
        "dedup_key",
        "not_before",
        "clock",
        "started_ms",
        "started_seq",
        "done",
        "created_ms",
    ),
)
schedules = TableNames(
    "bide_schedules", ("name", "spec", "paused", "since_ms", "last_slot_ms", "updated_ms")
)
