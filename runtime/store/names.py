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
    "records",
    "runs",
]

FORMAT_VERSION = 1
"""The journal format of a run, written in its header record. A reader refuses any other."""

HEAD_REVISION = "0003"
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
