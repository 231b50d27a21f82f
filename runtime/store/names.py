"""The journal's table and column names and the versions it carries, without SQLAlchemy: what
the SQLite writer and readers build their SQL from. ``schema`` defines its tables with them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FORMAT_VERSION",
    "HEAD_REVISION",
    "INDEX_COLUMNS",
    "VERSION_TABLE",
    "TableNames",
    "leases",
    "records",
    "runs",
]

FORMAT_VERSION = 1
"""The journal format of a run, written in its header record. A reader refuses any other."""

HEAD_REVISION = "0002"
"""The schema revision this bide needs: the newest Alembic revision it ships."""

VERSION_TABLE = "bide_alembic_version"

INDEX_COLUMNS = ("status", "agent", "turns", "detail")
"""The columns of ``bide_runs`` a writer may set (``update_index``, ``append(index=)``)."""


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
    ("run_id", "format", "created_ms", "updated_ms", "status", "agent", "turns", "detail"),
)
leases = TableNames(
    "bide_leases",
    ("run_id", "epoch", "owner", "host", "acquired_ms", "expires_ms", "released"),
)
