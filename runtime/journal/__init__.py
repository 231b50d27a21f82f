"""The journal: an append-only, per-run record of intents and results, on SQLite (embedded) or
PostgreSQL (shared by many processes and machines)."""

from runtime.journal.journal import Journal
from runtime.journal.postgres import PostgresStore
from runtime.journal.protocol import RunPage, RunRow, Store
from runtime.journal.resolution import Decided, Resolution
from runtime.journal.sqlite.store import SQLiteStore
from runtime.records import Appended, Entry, Record

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
