"""SQLite underneath the journal: connection setup and readers (``setup``), the batch logic that
decides each key's winner (``batch``), the group-commit writer thread (``writer``), and the
``SQLiteStore`` on top of them (``sqlite.store``, imported from ``runtime.journal``)."""

from runtime.store.sqlite.batch import AppendOp, CreateOp, IndexOp, LeaseOp, Op
from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, Readers, check_format, configure
from runtime.store.sqlite.writer import Writer

__all__ = [
    "BUSY_TIMEOUT_MS",
    "AppendOp",
    "CreateOp",
    "IndexOp",
    "LeaseOp",
    "Op",
    "Readers",
    "Writer",
    "check_format",
    "configure",
]
