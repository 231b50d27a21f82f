"""SQLite underneath the journal: connection setup and readers (``setup``), the batch's SQL
(``batch``, ``leases``), the group-commit writer thread (``writer``), the reads (``queries``), the
schema (``migrate``) and ``SQLiteStore`` on top of them (``sqlite.store``, imported from
``runtime.journal``)."""

from runtime.store.sqlite.setup import BUSY_TIMEOUT_MS, Readers, configure
from runtime.store.sqlite.writer import Writer

__all__ = ["BUSY_TIMEOUT_MS", "Readers", "Writer", "configure"]
