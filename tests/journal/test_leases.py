"""The lease contract every store keeps: one holder, expiry, takeover by epoch, fencing, claims."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import ConfigError, LeaseLost, RunBusy, StorageError
from runtime.journal import SQLiteStore, Store
from runtime.ownership import Owner, boot_id, is_alive, process_start, this_host
from runtime.store.decide import WAKE_KINDS
from runtime.store.postgres import PostgresStore
from runtime.testing import MemoryStore

TTL = 15.0


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Store]:
    s: Store
    if request.param == "sqlite":
        s = await SQLiteStore.open(db_path)
    elif request.param == "postgres":
        s = await PostgresStore.open(request.getfixturevalue("pg_url"))
    else:
        s = MemoryStore()
    try:
        yield s
    finally:
        await s.close()


def owner(name: str = "w-1", host: str | None = None) -> Owner:
    return dataclasses.replace(Owner.here(worker=name), host=host or this_host())


async def test_the_first_acquire_gets_epoch_one_and_names_its_owner(store: Store) -> None:
    me = owner()
    lease = await store.acquire("r", me, ttl=TTL)
    assert (lease.epoch, lease.owner, lease.live, lease.released) == (1, me, True, False)
    assert lease.expires_ms - lease.acquired_ms == TTL * 1000
    assert await store.lease("r") == lease


async def test_a_live_lease_refuses_a_second_owner_naming_the_first(store: Store) -> None:
    first = await store.acquire("r", owner("w-3"), ttl=TTL)
    with pytest.raises(RunBusy) as caught:
        await store.acquire("r", owner("w-4"), ttl=TTL)
    assert caught.value.lease == first
    assert str(caught.value).startswith("run r is being driven by worker w-3 (host ")
    assert "lease until" in str(caught.value)


async def test_of_many_concurrent_acquirers_exactly_one_wins(store: Store) -> None:
    outcomes = await asyncio.gather(
        *(store.acquire("r", owner(f"w-{i}"), ttl=TTL) for i in range(50)), return_exceptions=True
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(won) == 1
    assert all(isinstance(o, RunBusy) for o in outcomes if o is not won[0])


async def test_an_expired_lease_is_taken_over_with_the_next_epoch(store: Store) -> None:
    await store.acquire("r", owner("w-1"), ttl=0.05)
    await asyncio.sleep(0.1)
    stale = await store.lease("r")
    assert stale is not None and not stale.live
    taken = await store.acquire("r", owner("w-2"), ttl=TTL)
    assert (taken.epoch, taken.owner.worker, taken.live) == (2, "w-2", True)


async def test_take_over_names_the_epoch_whose_holder_is_gone(store: Store) -> None:
    first = await store.acquire("r", owner("w-1"), ttl=TTL)
    with pytest.raises(RunBusy):
        await store.acquire("r", owner("w-2"), ttl=TTL, take_over=first.epoch + 1)
    taken = await store.acquire("r", owner("w-2"), ttl=TTL, take_over=first.epoch)
    assert taken.epoch == 2
    with pytest.raises(RunBusy):  # the same stale epoch cannot take it twice
        await store.acquire("r", owner("w-3"), ttl=TTL, take_over=first.epoch)


async def test_release_frees_the_run_and_a_stale_release_changes_nothing(store: Store) -> None:
    first = await store.acquire("r", owner("w-1"), ttl=TTL)
    assert await store.release(first)
    released = await store.lease("r")
    assert released is not None and released.released and not released.live
    second = await store.acquire("r", owner("w-2"), ttl=TTL)
    assert second.epoch == 2
    assert not await store.release(first)
    assert await store.lease("r") == second


async def test_renew_extends_a_held_lease_and_fails_once_taken_over(store: Store) -> None:
    first = await store.acquire("r", owner("w-1"), ttl=0.2)
    await asyncio.sleep(0.05)
    renewed = await store.renew(first, ttl=TTL)
    assert renewed.epoch == first.epoch and renewed.expires_ms > first.expires_ms
    await store.acquire("r", owner("w-2"), ttl=TTL, take_over=first.epoch)
    with pytest.raises(LeaseLost, match="taken over"):
        await store.renew(first, ttl=TTL)


async def test_appends_under_a_taken_over_epoch_are_refused_and_write_nothing(
    store: Store,
) -> None:
    first = await store.acquire("r", owner("w-1"), ttl=TTL)
    assert await store.create_run("r", epoch=first.epoch)
    assert (await store.append("r", "a", "t", 1, epoch=first.epoch)).won
    await store.acquire("r", owner("w-2"), ttl=TTL, take_over=first.epoch)
    with pytest.raises(LeaseLost):
        await store.append("r", "b", "t", 2, epoch=first.epoch)
    with pytest.raises(LeaseLost):
        await store.update_index("r", epoch=first.epoch, status="halted")
    with pytest.raises(LeaseLost):
        await store.create_run("r2", epoch=first.epoch)
    assert await store.get("r", "b") is None
    row = await store.run_row("r")
    assert row is not None and row.status == "running"
    assert not await store.check_run("r2")
    assert (await store.append("r", "b", "t", 3, epoch=2)).won


async def test_an_expired_lease_still_fences_nobody_until_it_is_taken(store: Store) -> None:
    lease = await store.acquire("r", owner(), ttl=0.05)
    await store.create_run("r", epoch=lease.epoch)
    await asyncio.sleep(0.1)
    assert (await store.append("r", "late", "t", 1, epoch=lease.epoch)).won


async def test_an_epoch_on_a_run_without_a_lease_is_refused(store: Store) -> None:
    await store.create_run("r")
    with pytest.raises(LeaseLost, match="no lease"):
        await store.append("r", "k", "t", 1, epoch=1)


async def test_run_rows_carry_the_lease(store: Store) -> None:
    await store.create_run("free")
    lease = await store.acquire("held", owner(), ttl=TTL)
    await store.create_run("held", epoch=lease.epoch)
    held = await store.run_row("held")
    free = await store.run_row("free")
    assert held is not None and held.lease == lease
    assert free is not None and free.lease is None
    listed = {r.run_id: r.lease for r in (await store.list_runs()).runs}
    assert listed == {"held": lease, "free": None}


async def test_claimable_lists_runs_to_drive_that_no_live_owner_holds(store: Store) -> None:
    for run_id in ("never", "expired", "held", "released", "here", "halted", "ended"):
        await store.create_run(run_id)
    await store.update_index("halted", status="halted")
    await store.update_index("ended", status="completed")
    await store.acquire("expired", owner(), ttl=0.05)
    await store.acquire("held", owner(host="elsewhere"), ttl=TTL)
    await store.release(await store.acquire("released", owner(), ttl=TTL))
    await store.acquire("here", owner(), ttl=TTL)
    await asyncio.sleep(0.1)
    claimable = dict(await store.claimable(limit=100))
    assert set(claimable) == {"never", "expired", "released"}
    assert claimable["never"] is None
    with_host = dict(await store.claimable(limit=100, host=this_host()))
    assert set(with_host) == {"never", "expired", "released", "here"}
    assert len(await store.claimable(limit=2)) == 2


async def test_claimable_given_an_agent_lists_only_the_runs_that_agent_started(
    store: Store,
) -> None:
    await store.create_run("billing-1", agent="billing")
    await store.create_run("refund-1", agent="refunds")
    await store.create_run("nameless")
    assert set(dict(await store.claimable(limit=100))) == {"billing-1", "refund-1", "nameless"}
    assert set(dict(await store.claimable(limit=100, agent="billing"))) == {"billing-1"}
    assert await store.claimable(limit=100, agent="nobody") == []


def test_an_owner_is_gone_once_its_process_is() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(child.pid)
    child.wait()
    dead = Owner("x", this_host(), child.pid, start, 0)
    assert dead.gone()
    me = Owner.here()
    assert not me.gone()
    assert not dataclasses.replace(me, host="another-host").gone()
    assert dataclasses.replace(me, pid_start=(me.pid_start or 0) + 1).gone()  # a reused pid
    assert me.pid == os.getpid()


async def test_a_lease_of_a_gone_process_on_this_host_is_not_alive(store: Store) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = Owner("x", this_host(), child.pid, None, 0)
    lease = await store.acquire("r", dead, ttl=TTL)
    assert lease.live and not is_alive(lease)
    assert is_alive(await store.acquire("s", owner(), ttl=TTL))


async def test_claimable_lists_orphans_before_runs_never_driven(store: Store) -> None:
    """A backlog of submitted runs must not delay the takeover of a run whose drive died."""
    for i in range(5):
        await store.create_run(f"new-{i}")
    await store.create_run("orphan")
    await store.acquire("orphan", owner(host="elsewhere"), ttl=0.05)
    await asyncio.sleep(0.1)
    first, *_ = await store.claimable(limit=2)
    assert first[0] == "orphan"


async def test_an_append_that_releases_frees_the_lease_in_its_own_transaction(
    store: Store,
) -> None:
    """A drive's end record and the end of its lease commit together; a refused one keeps it."""
    lease = await store.acquire("r", owner(), ttl=TTL)
    await store.create_run("r", epoch=lease.epoch)
    await store.append("r", "cancel", "cancel", {})
    refused = await store.append(
        "r", "end", "end", {}, unless="cancel", epoch=lease.epoch, release=True
    )
    assert refused.record is None and not refused.released
    held = await store.lease("r")
    assert held is not None and held.live and not held.released
    ended = await store.append("r", "end", "end", {}, epoch=lease.epoch, release=True)
    assert ended.won and ended.released
    freed = await store.lease("r")
    assert freed is not None and freed.released and not freed.live
    assert (await store.acquire("r", owner("w-2"), ttl=TTL)).epoch == lease.epoch + 1
    with pytest.raises(ConfigError, match="epoch"):
        await store.append("r", "x", "t", {}, release=True)


async def test_a_lease_granted_or_renewed_carries_its_holders_own_owner(store: Store) -> None:
    """The holder knows who it is: its Owner is kept, not read back from the row."""
    me = owner()
    lease = await store.acquire("r", me, ttl=TTL)
    assert lease.owner is me
    assert (await store.renew(lease, ttl=TTL)).owner is me
    with pytest.raises(RunBusy) as refused:
        await store.acquire("r", owner("w-2"), ttl=TTL)
    assert refused.value.lease.owner == me and refused.value.lease.owner is not me


async def test_claimable_lists_runs_nobody_holds_before_the_live_leases_of_this_host(
    store: Store,
) -> None:
    """A second worker of this host, with two free slots, finds the queued runs: the runs its
    neighbour drives (live leases of this host, listed so that a gone process's can be taken
    over) come after them."""
    for i in range(3):
        await store.create_run(f"held-{i}")
        await store.acquire(f"held-{i}", owner(), ttl=TTL)
    for i in range(2):
        await store.create_run(f"queued-{i}")
    found = await store.claimable(limit=2, host=this_host())
    assert [run_id for run_id, _ in found] == ["queued-0", "queued-1"]
    everything = [run_id for run_id, _ in await store.claimable(limit=10, host=this_host())]
    assert everything[:2] == ["queued-0", "queued-1"]
    assert sorted(everything[2:]) == ["held-0", "held-1", "held-2"]


async def test_a_lease_is_timed_on_the_journals_clock_not_the_wall_clock(store: Store) -> None:
    """The expiry a store grants is on its own clock (``clock_ms``): PostgreSQL's, or this
    boot's monotonic clock for SQLite, which a step of the wall clock does not move."""
    before = await store.clock_ms()
    lease = await store.acquire("r", owner(), ttl=TTL)
    after = await store.clock_ms()
    assert before <= lease.acquired_ms <= after
    assert lease.expires_ms == lease.acquired_ms + TTL * 1000
    # Shown to people, the times are wall-clock times.
    assert abs(lease.wall_ms(lease.acquired_ms) - time.time() * 1000) < 5_000


def test_an_owner_of_another_pid_namespace_or_boot_is_never_known_gone() -> None:
    """A container that shares the host name (host networking) names pids of its own
    namespace: a pid missing here says nothing of it, and its lease is waited out."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = dataclasses.replace(Owner.here(), pid=child.pid, pid_start=None)
    assert dead.gone()
    assert not dataclasses.replace(dead, pidns="pid:[1]").gone()
    assert not dataclasses.replace(dead, boot="another-boot").gone()
    assert Owner.from_json(dead.to_json()) == dead  # both are recorded with the lease


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_on_sqlite_a_lease_of_another_boot_is_over_and_an_older_bides_is_on_the_wall_clock(
    kind: str, db_path: Path
) -> None:
    """The boot-time clock starts again at each boot: a lease timed on another boot's clock
    belongs to a process that is gone. A lease written by a bide that named no clock was timed
    on the wall clock, and is judged on it."""
    from runtime.store import leases

    now = leases.now_ms()
    far = now + 3_600_000
    mine = json.dumps({**owner().to_json(), "clock": boot_id()})
    other = json.dumps({**owner().to_json(), "clock": "another-boot"})
    older = json.dumps(owner().to_json())
    wall = time.time_ns() // 1_000_000
    assert leases.holds((1, mine, "h", now, far, False), now)
    assert not leases.holds((1, mine, "h", now, now, False), now)
    assert not leases.holds((1, mine, "h", now, far, True), now)
    assert not leases.holds((1, other, "h", now, far, False), now)
    assert leases.holds((1, older, "h", wall, wall + 60_000, False), now)
    assert not leases.holds((1, older, "h", wall - 60_000, wall - 1, False), now)
    s: Store = await SQLiteStore.open(db_path) if kind == "sqlite" else MemoryStore()
    try:
        lease = await s.acquire("r", owner(), ttl=TTL)
        assert lease.live
        if isinstance(s, SQLiteStore):
            with sqlite3.connect(db_path) as conn:
                conn.execute("UPDATE bide_leases SET owner = ?", (other,))
        else:
            s._leases["r"] = (lease.epoch, other, *s._leases["r"][2:])
        took = await s.acquire("r", owner("w-2"), ttl=TTL)
        assert took.epoch == lease.epoch + 1
    finally:
        await s.close()


async def test_an_expired_lease_is_never_renewed_even_if_nobody_took_it(store: Store) -> None:
    """Once its time ran out a lease may have been judged over (a reconciler settled its
    attempt as not executed): its stalled holder cannot revive it by a renewal, and must
    acquire the run anew, under a new epoch, which fences its old appends."""
    lease = await store.acquire("r", owner(), ttl=0.2)
    await asyncio.sleep(0.3)
    with pytest.raises(LeaseLost, match="expired before it was renewed") as expired:
        await store.renew(lease, ttl=TTL)
    assert not expired.value.taken_over  # nobody holds it: a worker may claim it again
    again = await store.acquire("r", owner(), ttl=TTL)
    assert again.epoch == lease.epoch + 1
    with pytest.raises(LeaseLost, match="another owner holds epoch") as taken:
        await store.renew(lease, ttl=TTL)
    assert taken.value.taken_over  # another owner drives it: a worker leaves it to that one


async def _stopped(store: Store, run_id: str, status: str, **index: object) -> int:
    """A drive of ``run_id`` that journals a question and stops ``status``, as the loop does;
    returns the seq of its question."""
    lease = await store.acquire(run_id, owner(), ttl=TTL)
    await store.create_run(run_id, epoch=lease.epoch)
    asked = await store.append(run_id, "interrupt/c/k", "interrupt", {}, epoch=lease.epoch)
    assert asked.record is not None
    index.setdefault("wake_seq", asked.record.seq)
    await store.update_index(run_id, epoch=lease.epoch, status=status, **index)
    await store.release(lease)
    return asked.record.seq


async def test_a_waiting_run_is_claimable_once_it_is_due_on_the_journals_clock(
    store: Store,
) -> None:
    now = await store.clock_ms()
    await _stopped(store, "timer", "waiting", due_ms=now + 400)
    await _stopped(store, "never-due", "waiting")
    assert dict(await store.claimable(limit=10)) == {}
    await asyncio.sleep(0.5)
    assert set(dict(await store.claimable(limit=10))) == {"timer"}


@pytest.mark.parametrize("status", ["waiting", "halted"])
async def test_a_record_that_may_wake_a_stopped_run_makes_it_claimable_once_committed_after(
    store: Store, status: str
) -> None:
    """An answer, a decision, a cancel, a resolution, a signal: committed after the seq the
    drive saw through, it wakes the run; records of other kinds, and those before, do not."""
    for kind in WAKE_KINDS:
        run_id = f"{status}-{kind}"
        await _stopped(store, run_id, status)
        await store.append(run_id, f"note/{kind}", "reconcile", {})  # a kind that wakes nothing
        assert run_id not in dict(await store.claimable(limit=50))
        await store.append(run_id, f"{kind}/x", kind, {})
        assert run_id in dict(await store.claimable(limit=50))


async def test_a_record_committed_before_the_drive_stopped_but_unseen_by_it_still_wakes_the_run(
    store: Store,
) -> None:
    """The drive gives the seq through which it saw its run: an answer committed between its
    question and its "waiting" (which it did not see) is after that seq, and wakes the run."""
    lease = await store.acquire("r", owner(), ttl=TTL)
    await store.create_run("r", epoch=lease.epoch)
    asked = await store.append("r", "interrupt/c/k", "interrupt", {}, epoch=lease.epoch)
    await store.append("r", "answer/c/k", "answer", {"value": 1})  # a person, meanwhile
    assert asked.record is not None
    await store.update_index("r", epoch=lease.epoch, status="waiting", wake_seq=asked.record.seq)
    await store.release(lease)
    assert "r" in dict(await store.claimable(limit=10))


async def test_a_waiting_status_set_from_outside_the_drive_never_moves_its_wake(
    store: Store,
) -> None:
    """A verb sets a status it read from records a moment ago: it must not move the wake past
    a record it did not see, nor set a due time (only the drive that stops does)."""
    await _stopped(store, "r", "waiting")
    await store.append("r", "answer/c/k", "answer", {"value": 1})
    await store.update_index("r", status="waiting")  # a stale read of the records
    assert "r" in dict(await store.claimable(limit=10))
    with pytest.raises(StorageError, match="due_ms is set by the drive that stops"):
        await store.update_index("r", status="waiting", due_ms=0)
    await store.update_index("r", status="running")  # a ready status clears the wait
    assert "r" in dict(await store.claimable(limit=10))
