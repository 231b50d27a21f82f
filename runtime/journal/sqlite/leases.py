"""Leases inside a batch: acquire, renew and release ops, and the epoch check that fences appends.

A batch reads the leases of every run it touches under an epoch or a lease op once, decides each
op in order against that state (earlier ops of the batch included), and writes the leases it
changed at the end, all inside the writer's transaction: a fenced append and the takeover that
fenced it can never both commit.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from runtime.journal import names

__all__ = ["LeaseOp", "LeaseRow", "decide", "read_leases", "write_leases"]

_L = names.leases.name
_COLUMNS = ("run_id", "epoch", "owner", "host", "acquired_ms", "expires_ms", "released")

LeaseRow = tuple[int, str, str, int, int, bool]
"""A lease as a batch holds it: epoch, owner JSON, host, acquired_ms, expires_ms, released."""


@dataclass(slots=True)
class LeaseOp:
    """Acquire, renew or release one run's lease.

    The outcome: for ``acquire``, ``(True, row, now)`` when granted or ``(False, row, now)``
    with the current lease when held; for ``renew``, ``(True, row, now)`` or ``(False, row,
    now)`` when the epoch moved on (``row`` None if the run has no lease); for ``release``,
    ``(released, row, now)``.
    """

    action: Literal["acquire", "renew", "release"]
    run_id: str
    epoch: int | None = None
    """renew, release: the epoch held. acquire: the epoch to take over (its holder is gone)."""
    owner: str = ""
    host: str = ""
    ttl_ms: int = 0


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


def decide(
    op: LeaseOp, leases: dict[str, LeaseRow], dirty: set[str], now: int
) -> tuple[bool, LeaseRow | None, int]:
    """Apply one lease op to the batch's view of the leases; its outcome (see ``LeaseOp``)."""
    current = leases.get(op.run_id)
    if op.action == "acquire":
        if (
            current is None
            or current[5]
            or current[4] <= now
            or (op.epoch is not None and current[0] == op.epoch)
        ):
            epoch = 1 if current is None else current[0] + 1
            granted: LeaseRow = (epoch, op.owner, op.host, now, now + op.ttl_ms, False)
            leases[op.run_id] = granted
            dirty.add(op.run_id)
            return True, granted, now
        return False, current, now
    if current is None or current[0] != op.epoch:
        return False, current, now
    if op.action == "renew":
        if current[5]:
            return False, current, now
        renewed: LeaseRow = (*current[:4], now + op.ttl_ms, False)
        leases[op.run_id] = renewed
        dirty.add(op.run_id)
        return True, renewed, now
    if current[5]:
        return False, current, now
    released: LeaseRow = (*current[:4], now, True)
    leases[op.run_id] = released
    dirty.add(op.run_id)
    return True, released, now


def write_leases(conn: sqlite3.Connection, leases: dict[str, LeaseRow], dirty: set[str]) -> None:
    conn.executemany(_UPSERT, [(run_id, *leases[run_id]) for run_id in dirty])
