"""The Store protocol: what a journal's storage must do, whatever the database under it.

The drive and the operator's verbs speak only this. ``SQLiteStore`` is the embedded
implementation; ``runtime.testing.MemoryStore`` keeps the same contract in a dict (for benches
and for users' tests). Give a Journal any store with ``Journal(store=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from runtime.journal.store import RunPage, RunRow
from runtime.records import Appended, Record

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    """Per-run append-only records under insert-if-absent keys, in one commit order.

    The contract every implementation keeps (the conformance tests in ``tests/journal`` hold
    each one to it):

    - ``append`` inserts ``payload`` under ``(run_id, key)`` unless the key exists; of two
      writers of one key exactly one wins, and both get the winning record. ``unless`` names
      keys whose presence refuses the insert, checked in the same transaction (``refused_by``
      says which); ``watch`` names a key whose presence is reported back; ``index`` updates the
      run's listing row in the same transaction. A caller is answered only after its record is
      durably committed.
    - ``seq`` orders records by commit across the whole store.
    - Nothing is ever updated or deleted; the listing index is derived.
    """

    @property
    def path(self) -> str:
        """Where the journal lives, for messages (a file path, a redacted URL, a name)."""
        ...

    @property
    def commits(self) -> int:
        """How many transactions were committed (group commit shares them)."""
        ...

    async def close(self) -> None: ...

    async def create_run(self, run_id: str, *, agent: str | None = None) -> bool:
        """Write the run's header unless the run exists; True if it is new."""
        ...

    async def append(
        self,
        run_id: str,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | tuple[str, ...] | None = None,
        watch: str | None = None,
        index: Mapping[str, Any] | None = None,
    ) -> Appended: ...

    async def update_index(
        self, run_id: str, *, unless: str | None = None, **fields: Any
    ) -> None: ...

    async def get(self, run_id: str, key: str) -> Record | None: ...

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        ...

    async def load(self, run_id: str, *, after: int = 0) -> list[Record]: ...

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage: ...

    async def run_row(self, run_id: str) -> RunRow | None: ...
