"""Lease rows in SQLite: read the rows of a batch's fenced runs, write back those it changed (the
rule that decides them is ``store.leases.judge``)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable

from runtime.store import names
from runtime.store.decide import LeaseRow

__all__ = ["read_leases", "write_leases"]

_L = names.leases.name
_COLUMNS = ("run_id", "epoch", "owner", "host", "acquired_ms", "expires_ms", "released")


@functools.cache
def _select_sql(n: int) -> str:
    return f"SELECT {', '.join(_COLUMNS)} FROM {_L} WHERE run_id IN ({', '.join('?' * n)})"


_UPSERT = (
    f"INSERT INTO {_L} ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT (run_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)


def read_leases(
    conn: sqlite3.Connection, run_ids: Iterable[str], limit: int
) -> dict[str, LeaseRow]:
    ids = list(dict.fromkeys(run_ids))
    found: dict[str, LeaseRow] = {}
    step = max(1, min(limit - 1, 500))
    for i in range(0, len(ids), step):
        part = ids[i : i + step]
        for run_id, *row in conn.execute(_select_sql(len(part)), part):
            epoch, owner, host, acquired, expires, released = row
            found[run_id] = (epoch, owner, host, acquired, expires, bool(released))
    return found


def write_leases(conn: sqlite3.Connection, leases: dict[str, LeaseRow], dirty: set[str]) -> None:
    conn.executemany(_UPSERT, [(run_id, *leases[run_id]) for run_id in dirty])
