"""The journal: an append-only, per-run record of intents and results, on SQLite (embedded) or
PostgreSQL (shared by many processes and machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.journal.journal import Journal
from runtime.journal.protocol import RunPage, RunRow, Store
from runtime.journal.resolution import Decided, Resolution
from runtime.journal.sqlite.store import SQLiteStore
from runtime.records import Appended, Entry, Record

if TYPE_CHECKING:
    from runtime.journal.postgres import PostgresStore

__all__ = [
    "Appended",
    "Decided",
    "Entry",
    "Journal",
    "PostgresStore",
    "Record",
    "Resolution",
    "RunPage",
    "RunRow",
    "SQLiteStore",
    "Store",
]


def __getattr__(name: str) -> Any:
    # The PostgreSQL stack (SQLAlchemy's async engine) is imported only when it is asked for.
    if name == "PostgresStore":
        from runtime.journal.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
