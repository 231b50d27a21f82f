"""The journal: an append-only, per-run record of intents and results, on SQLite (embedded) or
PostgreSQL (shared by many processes and machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.journal.journal import Journal
from runtime.journal.resolution import Decided, Resolution
from runtime.records import Appended, Entry, Record
from runtime.store.protocol import RunPage, RunRow, Store
from runtime.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from runtime.store.postgres import PostgresStore

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
        from runtime.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
