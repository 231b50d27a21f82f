"""A drive's hold on its run's lease (``Holding``), and the one task per Journal that renews
every lease held through it (``Renewer``), so that a thousand drives cost one timer, not a
thousand heartbeat tasks. The rules are ``docs/guarantee.md``'s "Ownership"."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from runtime.errors import LeaseLost, RunBusy, StorageError
from runtime.logs import get_logger
from runtime.outage import Outage
from runtime.ownership import Lease, Owner, send_deadline
from runtime.store.queues import Queues

if TYPE_CHECKING:
    from runtime.store.protocol import Store

__all__ = ["Holding", "Renewer"]

log = get_logger("runtime.ownership")  # the logger operators knew these events by


class Holding:
    """The lease one drive holds: acquired before its first append, renewed by its Journal's
    ``Renewer`` while held, released when the drive ends (whatever the ending).

    ``acquire`` takes over at once a lease whose owner is a gone process of this host (a
    ``resume`` right after a crash need not wait for the TTL), and otherwise raises
    ``RunBusy``, or waits up to ``wait`` seconds for the lease to be released or to expire
    (logged once, ``lease_wait``, naming the holder).
    """

    __slots__ = ("deadline", "lease", "lost", "owner", "released", "renewer", "run_id")

    def __init__(self, renewer: Renewer, run_id: str, owner: Owner):
        self.renewer = renewer
        self.run_id = run_id
        self.owner = owner
        self.lease: Lease | None = None
        self.lost: LeaseLost | None = None
        """Set once a renewal learnt that this lease is lost: ``check`` raises it."""
        self.released = False
        self.deadline = 0.0
        """The ``time.monotonic()`` past which this drive sends no side effect
        (``ownership.send_deadline`` of the latest grant or renewal)."""

    @property
    def store(self) -> Store:
        return self.renewer.store

    @property
    def epoch(self) -> int:
        assert self.lease is not None, "the lease is acquired before anything is appended"
        return self.lease.epoch

    async def acquire(self, *, wait: float | None = None, claim: bool = False) -> Lease:
        """``claim``: as a worker claims a run, so that a queued run starts only if its queue's
        limits admit it (``store.queues``; ``QueueFull`` if they do not)."""
        store, ttl = self.renewer.store, self.renewer.ttl
        take = store.acquire
        if claim and isinstance(store, Queues):
            take = store.claim
        deadline = None if wait is None else time.monotonic() + wait
        said = False
        while True:
            asked = time.monotonic()
            try:
                lease = await take(self.run_id, self.owner, ttl=ttl)
                break
            except RunBusy as refused:
                held = refused.lease
                if held.owner.gone():
                    log.info("lease_taken_over", run_id=self.run_id, gone=held.owner.describe())
                    asked = time.monotonic()
                    try:
                        lease = await take(self.run_id, self.owner, ttl=ttl, take_over=held.epoch)
                        break
                    except RunBusy:  # another process took it first: look again
                        continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is None or remaining <= 0:
                    raise
                if not said:  # once: a wait for a live holder is never a silent stall
                    said = True
                    log.info(
                        "lease_wait",
                        run_id=self.run_id,
                        holder=held.owner.describe(),
                        wait_s=round(remaining, 3),
                    )
                renew = self.renewer.renew
                await asyncio.sleep(min(remaining, max(0.05, min(1.0, renew))))
        self.lease = lease
        self.deadline = send_deadline(asked, ttl)
        self.renewer.hold(self)
        return lease

    def check(self) -> None:
        """Raise ``LeaseLost`` if a renewal learnt that this lease is lost."""
        if self.lost is not None:
            raise self.lost

    async def before_send(self) -> None:
        """Right before a tool is called (a side effect leaves, a read runs, a task is polled):
        raise ``LeaseLost`` unless this drive's lease
        lives by its own monotonic deadline (``ownership.send_deadline``). Past the deadline
        (renewals failed, or this process stalled) the lease is renewed once, within a renewal
        interval, and the effect is sent only if that succeeds: the lease may have ended, and
        another owner may have taken the run and settled this attempt.

        Only a stall between this check and the send itself is left; the settle time of an
        *absent* is counted from the lease's end, which covers a stall shorter than the margin
        (docs/guarantee.md, "Ownership")."""
        self.check()
        if time.monotonic() < self.deadline:
            return
        lease, renewer = self.lease, self.renewer
        assert lease is not None, "a side effect is sent by a drive that holds its lease"
        asked = time.monotonic()
        try:
            async with asyncio.timeout(renewer.renew):
                renewed = await renewer.store.renew(lease, ttl=renewer.ttl)
        except LeaseLost as exc:
            self.lost = exc
            renewer.drop(self)
            raise
        except (TimeoutError, StorageError) as exc:
            raise LeaseLost(
                f"run {self.run_id!r}: this drive's lease (epoch {lease.epoch}) may have ended "
                f"(its deadline passed and a renewal failed: {exc or 'no answer'}); it sends no "
                "side effect",
                run_id=self.run_id,
                taken_over=False,
            ) from exc
        self.lease = renewed
        self.deadline = send_deadline(asked, renewer.ttl)
        log.info("lease_renewed_before_send", run_id=self.run_id, epoch=renewed.epoch)

    def ended(self) -> None:
        """The store released the lease in the transaction that committed the run's end
        (``Store.append(release=True)``): nothing more to renew, or to release."""
        self.renewer.drop(self)
        self.released = True

    async def release(self) -> None:
        """Stop renewing and release the lease (a failure is logged: the lease expires).

        A lease another owner took over is left as it is: the store changes nothing for a
        release of an epoch that moved on."""
        self.renewer.drop(self)
        if self.lease is None or self.released:
            return
        self.released = True
        try:
            await self.renewer.store.release(self.lease)
        except Exception as exc:
            log.warning("lease_release_failed", run_id=self.run_id, error=str(exc))


class Renewer:
    """Renews every lease held through one Journal, from one task that the Journal owns
    (``aclose``). Started by the first lease held, it ends whenever none is.

    Each lease is renewed every ``renew`` seconds from its acquisition; leases that fall due
    together are renewed together (their writes share a commit). A renewal refused because
    another owner took the lease over sets that holding's ``lost``: its drive stops at its next
    ``check`` or append. Any other failure (a locked or unreachable database, or no answer
    within an interval) is logged and tried again an interval later, as long as the lease
    lives. Should the task stop for any
    other reason than ``aclose``, every lease still held is marked lost, so that no drive goes
    on with a lease that nobody renews.
    """

    def __init__(self, store: Store, *, ttl: float, renew: float):
        self.store = store
        self.ttl = ttl
        self.renew = renew
        self._due: dict[Holding, float] = {}
        """The held leases, with when each is next due (``time.monotonic``). Every lease waits
        the same interval, so insertion order is due order: the first one is due first."""
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._outage = Outage(log, "lease_renew_failed", "lease_renewals_restored")

    def __len__(self) -> int:
        """How many leases are held (and renewed) now."""
        return len(self._due)

    def hold(self, holding: Holding) -> None:
        """Renew ``holding``'s lease (acquired just now) until ``drop``."""
        if self._closed:
            raise StorageError("the journal is closed: no lease is renewed through it")
        self._due[holding] = time.monotonic() + self.renew
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="bide-lease-renewer"
            )
            self._task.add_done_callback(self._stopped)

    def drop(self, holding: Holding) -> None:
        """Renew ``holding``'s lease no more (it is released, or lost)."""
        self._due.pop(holding, None)

    async def aclose(self) -> None:
        """Stop renewing (the Journal closes: its store does too)."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while self._due:
            wait = next(iter(self._due.values())) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # the first may have been released meanwhile: look again
            try:
                await self._renew_due()
            except Exception as exc:  # a bug: said, and the leases are tried again
                log.error("lease_renewal_failed", error=repr(exc))
        # Nothing is held: end now, with no await in between, so that the next hold starts
        # a task of its own.
        self._task = None

    async def _renew_due(self) -> None:
        now = time.monotonic()
        horizon = now + self.renew / 10  # close enough to be renewed with the first
        due: list[Holding] = []
        for holding, at in self._due.items():
            if at > horizon:
                break
            due.append(holding)
        for holding in due:  # to the end of the line: due again one interval from now
            del self._due[holding]
            self._due[holding] = now + self.renew
        renewals = []
        asked = time.monotonic()
        for holding in due:
            assert holding.lease is not None
            renewals.append(self.store.renew(holding.lease, ttl=self.ttl))
        try:
            # One slow renewal must not hold back the others' next one: give up at the next.
            async with asyncio.timeout(self.renew):
                outcomes = await asyncio.gather(*renewals, return_exceptions=True)
        except TimeoutError:
            self._outage.failed(leases=len(due), error="no answer in an interval")
            return
        failed = 0
        for holding, outcome in zip(due, outcomes, strict=True):
            if holding not in self._due:  # released while it was being renewed
                continue
            if isinstance(outcome, Lease):
                holding.lease = outcome
                holding.deadline = max(holding.deadline, send_deadline(asked, self.ttl))
            elif isinstance(outcome, LeaseLost):
                holding.lost = outcome
                self.drop(holding)
                log.error("lease_lost", run_id=holding.run_id, error=str(outcome))
            elif isinstance(outcome, Exception):  # tried again at the next interval
                failed += 1
                self._outage.failed(run_id=holding.run_id, error=str(outcome))
            else:
                raise outcome
        if not failed:
            self._outage.ended(leases=len(due))

    def _stopped(self, task: asyncio.Task[None]) -> None:
        if self._closed or self._task is not task:
            return  # closed, or it ended with nothing held (a later hold has its own task)
        self._task = None
        held, self._due = list(self._due), {}
        if not held:
            return
        cause = "it was cancelled" if task.cancelled() else repr(task.exception())
        log.error("lease_renewer_stopped", cause=cause, held=len(held))
        for holding in held:
            holding.lost = LeaseLost(
                f"run {holding.run_id!r}: this drive's lease is no longer renewed (the "
                f"journal's lease renewer stopped: {cause}); it appends nothing more and runs "
                "no further tool",
                run_id=holding.run_id,
                taken_over=False,
            )
