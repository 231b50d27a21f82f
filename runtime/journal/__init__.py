"""The journal: an append-only, per-run record of intents and results, on SQLite."""

from runtime.journal.journal import Decided, Journal, Resolution
from runtime.journal.protocol import Store
from runtime.journal.store import Appended, Record, RunPage, RunRow, SQLiteStore

__all__ = [
    "Appended",
    "Decided",
    "Journal",
    "Record",
    "Resolution",
    "RunPage",
    "RunRow",
    "SQLiteStore",
    "Store",
]
