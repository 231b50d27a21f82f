"""The lease rule of the stores that decide leases in Python (SQLite, memory): ``judge`` settles an
acquire, renew or release against a batch's view of the leases (``decide`` calls it in order
with the batch's other ops, so a fenced append and the takeover that fenced it can never both
commit), on the journal's clock.

Leases are timed on the journal's clock, ``now_ms``: every process that shares a SQLite file
shares its host, so that is the host's boot-time clock, which steps of the wall clock do not
move. A lease's owner JSON names the clock its times are on (``"clock"``: the boot's id); a
lease of another boot is over (its process is gone, and its times are another clock's), and one
that names no clock (an older bide's) is timed on the wall clock, as that bide timed it.
"""

from __future__ import annotations

import functools
import json
import time

from runtime.ownership import Lease, Owner, boot_id, boot_wall_ms, boottime_ms, lease_from_row
from runtime.store.decide import LeaseRow
from runtime.store.ops import LeaseOp

__all__ = [
    "boot_pattern",
    "ends_ms",
    "holds",
    "judge",
    "lease_of",
    "now_ms",
    "owner_text",
    "wall_offset_ms",
]


def now_ms() -> int:
    """The journal's clock: this boot's ``boottime_ms``, or the wall clock where the machine
    tells no boot id (not Linux)."""
    return boottime_ms() if boot_id() is not None else time.time_ns() // 1_000_000


def wall_offset_ms(now: int) -> int:
    """The wall clock minus the journal's clock ``now``: to show a lease's times to people. The
    same in every process of this boot (``boot_wall_ms``), so two reads of a lease show it
    alike."""
    if boot_id() is None:
        return 0  # the journal's clock is the wall clock
    booted = boot_wall_ms()
    return booted if booted is not None else time.time_ns() // 1_000_000 - now


def owner_text(owner: Owner) -> str:
    """The owner JSON of a lease granted now: the owner, and the clock the lease is timed on."""
    data = owner.to_json()
    boot = boot_id()
    if boot is not None:
        data["clock"] = boot
    return json.dumps(data)


@functools.lru_cache(maxsize=4096)
def _clock_of(owner: str) -> str | None:
    try:
        clock = json.loads(owner).get("clock")
    except (ValueError, AttributeError):
        return None
    return clock if isinstance(clock, str) else None


def holds(row: LeaseRow, now: int) -> bool:
    """Whether a lease row holds its run at ``now`` (the journal's clock): not released, timed
    on this boot's clock and not yet expired; a row that names no clock, on the wall clock."""
    _epoch, owner, _host, _acquired, expires, released = row
    if released:
        return False
    clock = _clock_of(owner)
    if clock is None:
        return expires > time.time_ns() // 1_000_000
    return clock == boot_id() and expires > now


def ends_ms(row: LeaseRow, now: int) -> int | None:
    """When a lease row's lease ends, on the journal's clock, where its expiry is on another
    clock: 0 (before this boot began) for another boot's, the expiry moved onto this clock for
    an older bide's wall-clock lease; None when the expiry is on the journal's clock."""
    clock = _clock_of(row[1])
    if clock == boot_id():
        return None
    if clock is not None:
        return 0
    return row[4] - wall_offset_ms(now)


def lease_of(run_id: str, row: LeaseRow, now: int, owner: Owner | None = None) -> Lease:
    """The lease a row holds, judged at ``now`` on the journal's clock; with ``owner`` when the
    caller holds it (the row's owner is then that one, not read again)."""
    epoch, text, _host, acquired_ms, expires_ms, released = row
    return lease_from_row(
        run_id,
        epoch,
        text if owner is None else owner,
        acquired_ms,
        expires_ms,
        released,
        now,
        live=holds(row, now),
        wall_offset_ms=wall_offset_ms(now),
        ends_ms=ends_ms(row, now),
    )


@functools.cache
def boot_pattern() -> str:
    """A LIKE pattern that the owner JSON of every lease granted on this boot matches."""
    boot = boot_id()
    return "%" if boot is None else f'%"clock": "{boot}"%'


def judge(
    op: LeaseOp, leases: dict[str, LeaseRow], dirty: set[str], now: int
) -> tuple[bool, LeaseRow | None, int]:
    """Apply one lease op to the batch's view of the leases; its outcome (see ``LeaseOp``)."""
    current = leases.get(op.run_id)
    if op.action == "acquire":
        if (
            current is None
            or not holds(current, now)
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
        # An expired lease is over even if nobody took it yet: renewing it would revive an
        # owner whose attempt a reconciler may already have settled (it must acquire anew).
        if not holds(current, now):
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
