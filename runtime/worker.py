"""A worker: claims the runs that need driving and drives them, until it is stopped.

    async with Worker(journal, agent=my_agent, concurrency=4):
        ...  # the service runs; the worker recovers orphaned, ready and submitted runs

Runs that need driving are those the store lists as ``claimable``: not ended, not waiting for
a person, not halted, and with no live owner (a drive that crashed, a run that ``approve``,
``answer`` or ``resolve`` made ready, a run ``submit`` started). Halted runs whose tools
declare reconcilers are reconciled with backoff (``runtime.reconcile``); one that settles is
ready, and is claimed. A queued run that never started is claimed only when its queue's limits
admit it (``runtime.store.queues``: decided with the lease grant), highest priority first; and
on each pass the worker starts the due slots of the journal's schedules (``runtime.scheduler``).
Claiming a run is acquiring its
lease, so N workers on one journal never drive one run at once. ``stop()`` stops claiming, lets
each drive reach its next record boundary within ``grace`` seconds, then cancels what is left;
every lease is released on the way out. On a store that can say when runs become ready
(``Wakeups``: PostgreSQL's ``LISTEN/NOTIFY``) the worker claims them as soon as it hears, and
polls all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Self

from runtime import records as R
from runtime.agent import Agent
from runtime.errors import (
    BideError,
    ConfigError,
    CorruptJournal,
    LeaseLost,
    QueueFull,
    RunBusy,
    StorageError,
)
from runtime.holding import Holding
from runtime.journal.journal import Journal
from runtime.logs import get_logger
from runtime.loop import RunDrive
from runtime.outage import Outage
from runtime.ownership import Owner, this_host
from runtime.reconcile import due_ms, next_try_ms, settle_run
from runtime.result import RunResult
from runtime.scheduler import start_due_slots
from runtime.store.protocol import Wakeups
from runtime.store.queues import Queues

__all__ = ["Worker"]

log = get_logger(__name__)

RECONCILE_PAGE = 200
"""Halted runs read per query when looking for reconcilers that are due (every halted run is
looked at, a page at a time)."""

RECONCILE_SCAN = 2.0
"""Seconds between two readings of the journal's halted runs (a page at a time)."""

RECONCILE_IDLE = 30.0
"""Seconds before a halted run with nothing due to reconcile is looked at again."""

OpenAgent = Callable[[str], AbstractAsyncContextManager[Agent[Any]]]
"""From a run's journaled agent spec (``module:attr``) to an open Agent for one drive."""


class Worker:
    """Drives every run that needs driving in ``journal``, ``concurrency`` at a time.

    The agent for a run is ``agent`` if given, else the one ``open_agent`` builds from the
    spec the run journaled when it started (the CLI passes its spec loader). A fixed ``agent``
    claims only the runs it started (by its name, as the runs index records it), and reconciles
    only theirs; a queued run of another agent, claimed through its queue, is refused by the
    drive, reported once and left to its own. A run whose agent
    cannot be built, or whose drive fails with an error, is reported once and left alone by
    this worker. ``poll`` is how often the journal is asked for runs to claim when nothing
    woke the worker sooner: a drive of its own ending, a reconciler settling a halt, or, on a
    store that has ``wakeups()`` (PostgreSQL), any process making a run ready.
    """

    def __init__(
        self,
        journal: Journal,
        *,
        agent: Agent[Any] | None = None,
        open_agent: OpenAgent | None = None,
        concurrency: int = 4,
        poll: float = 1.0,
        grace: float = 30.0,
        name: str | None = None,
        idle_exit: float | None = None,
    ):
        if (agent is None) == (open_agent is None):
            raise ConfigError("a Worker needs an agent, or open_agent to build one per run")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive integer, not {concurrency!r}")
        for label, value in (("poll", poll), ("grace", grace), ("idle_exit", idle_exit)):
            if value is None and label == "idle_exit":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{label} must be a positive number of seconds, not {value!r}")
        self.journal = journal
        self.agent = agent
        self.open_agent = open_agent
        self.concurrency = concurrency
        self.poll = float(poll)
        self.grace = float(grace)
        self.idle_exit = idle_exit
        """Stop by itself once nothing was active or claimable for this long (batch jobs)."""
        self.name = name or Owner.here().id[:8]
        self.claimed = 0
        self.finished: dict[str, str] = {}
        """The runs this worker drove to a stop, with the status each stopped in."""
        self.skipped: dict[str, str] = {}
        """Runs this worker will not claim again, with why (reported once, when it happened)."""
        self._active: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        self._yield = asyncio.Event()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._seen_claimable = False
        self._halted: list[tuple[str, str | None]] | None = None
        """The halted runs read last, with their agents (``_halted_runs``), and when."""
        self._scanned_at = 0.0
        self._failing: dict[str, str] = {}
        """Schedules whose slots could not be started, with why (said once while alike)."""
        self._due: dict[str, int | None] = {}
        """When each halted run's reconcilers are next due (ms, the journal's clock)."""

    async def __aenter__(self) -> Self:
        self._loop = asyncio.create_task(self.run(), name=f"bide-worker:{self.name}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._loop is not None:
            await self._loop

    def stop(self) -> None:
        """Stop claiming; drives end at their next record boundary (``grace`` at most)."""
        self._stopping.set()
        self._wake.set()

    @property
    def active(self) -> list[str]:
        """The runs this worker drives now."""
        return list(self._active)

    async def run(self) -> None:
        """Claim and drive runs until ``stop()``; then drain, and return."""
        log.info("worker_started", worker=self.name, concurrency=self.concurrency)
        busy_at = time.monotonic()
        store = self.journal.store
        listener = None
        if isinstance(store, Wakeups):
            listener = asyncio.create_task(self._listen(store), name=f"bide-wake:{self.name}")
        # The journal away (a failover, say) is said once, and once more when it is back.
        claims = Outage(log, "worker_claim_failed", "worker_claims_restored")
        reconciles = Outage(log, "worker_reconcile_failed", "worker_reconcile_restored")
        schedules = Outage(log, "worker_schedules_failed", "worker_schedules_restored")
        try:
            while not self._stopping.is_set():
                # Cleared before the pass, not after: a wake-up heard during it means look again.
                self._wake.clear()
                free = self.concurrency - len(self._active)
                if free > 0:
                    try:
                        await self._claim(free)
                        claims.ended(worker=self.name)
                    except StorageError as exc:  # the journal is locked or away: poll again
                        claims.failed(worker=self.name, error=str(exc))
                    except Exception as exc:  # a bug, or a record no store should hold
                        # Never a silent death: said, and tried again at the next poll.
                        log.error("worker_claim_failed", worker=self.name, error=repr(exc))
                if not self._stopping.is_set():
                    try:
                        if await start_due_slots(
                            self.journal, self._open_spec, worker=self.name, failing=self._failing
                        ):
                            self._wake.set()  # runs were submitted: claim them at once
                        schedules.ended(worker=self.name)
                    except StorageError as exc:
                        schedules.failed(worker=self.name, error=str(exc))
                    except Exception as exc:  # a bad schedule or a bug: said, tried next pass
                        log.error("worker_schedules_failed", worker=self.name, error=repr(exc))
                settled = False
                try:
                    settled = await self._reconcile_halted()
                    reconciles.ended(worker=self.name)
                except StorageError as exc:
                    reconciles.failed(worker=self.name, error=str(exc))
                except Exception as exc:
                    log.error("worker_reconcile_failed", worker=self.name, error=repr(exc))
                # A run its reconciler just made ready is work: claimed at the next pass, never
                # left behind by an idle exit.
                if self._active or self._seen_claimable or settled:
                    busy_at = time.monotonic()
                elif self.idle_exit is not None and time.monotonic() - busy_at >= self.idle_exit:
                    log.info("worker_idle", worker=self.name, seconds=self.idle_exit)
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll):
                        await self._wake.wait()
        finally:
            if listener is not None:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
            await self._drain()
            log.info("worker_stopped", worker=self.name, claimed=self.claimed)

    async def _listen(self, store: Wakeups) -> None:
        """Wake the claim pass whenever the store says a run became ready. The store's own
        iterator outlives lost connections; should it fail or end anyway, that is logged and
        it is started again, and polling goes on meanwhile."""
        while True:
            wakes = store.wakeups()
            try:
                async for run_id in wakes:
                    if run_id is not None:
                        log.debug("worker_woken", worker=self.name, run_id=run_id)
                    self._wake.set()
                log.warning("worker_wakeups_ended", worker=self.name, polling=self.poll)
            except Exception as exc:  # a bug in the store: never a silent death
                log.error("worker_wakeups_failed", worker=self.name, error=repr(exc))
            finally:
                aclose = getattr(wakes, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()
            await asyncio.sleep(self.poll)

    def _open_spec(self, spec: str) -> AbstractAsyncContextManager[Agent[Any]]:
        """The agent of a schedule's spec: this worker's own agent if it has one."""
        if self.agent is not None:
            return contextlib.nullcontext(self.agent)
        assert self.open_agent is not None
        return self.open_agent(spec)

    async def _claim(self, free: int) -> None:
        store = self.journal.store
        queued: list[str] = []
        if isinstance(store, Queues):
            # Queued runs that never started, that their queues' limits would start now. Read
            # first, so that the runs claimable is read last, as fresh as it can be.
            queued = await store.candidates(limit=free + len(self.skipped))
        # A fixed agent claims only its own runs; one built per run from its spec, any.
        mine = self.agent.name if self.agent is not None else None
        found = await store.claimable(limit=free + len(self.skipped), host=this_host(), agent=mine)
        found += [(run_id, None) for run_id in queued]
        self._seen_claimable = any(
            run_id not in self.skipped
            and (lease is None or not lease.live or lease.owner.gone())
            and run_id not in self._active
            for run_id, lease in found
        )
        for run_id, lease in found:
            if free == 0 or self._stopping.is_set():
                return
            if run_id in self._active or run_id in self.skipped:
                continue
            if lease is not None and lease.live and not lease.owner.gone():
                continue  # held by a live process of this host
            holding = Holding(self.journal.renewer, run_id, Owner.here(worker=self.name))
            try:
                await holding.acquire(claim=True)
            except RunBusy:
                continue  # another worker claimed it first
            except QueueFull:
                continue  # another worker took its queue's last place first
            self.claimed += 1
            free -= 1
            log.info("worker_claimed", worker=self.name, run_id=run_id)
            task = asyncio.create_task(self._drive(run_id, holding), name=f"bide-drive:{run_id}")
            self._active[run_id] = task

    async def _drive(self, run_id: str, holding: Holding) -> None:
        started = time.monotonic()
        try:
            async with self._agent_for(run_id) as agent:
                drive = RunDrive(agent, self.journal, run_id, holding=holding, yielding=self._yield)
                drive.any_agent = self.agent is None  # built from the run's own spec
                result = await drive.go(None, None)
            self._report(run_id, result, time.monotonic() - started)
        except asyncio.CancelledError:
            log.warning("worker_drive_cancelled", worker=self.name, run_id=run_id)
            raise
        except CorruptJournal as exc:
            # Not the journal failing but the run's own records damaged: every drive fails alike.
            self._skip(run_id, f"{type(exc).__name__}: {exc}")
        except LeaseLost as exc:
            # Its lease ended. Taken over: another owner drives the run, and this worker leaves
            # it to that one. Expired before a renewal (or not renewed in time to send): nobody
            # holds it, and it stays claimable, by this worker too.
            log.warning(
                "worker_lease_lost",
                worker=self.name,
                run_id=run_id,
                taken_over=exc.taken_over,
                error=str(exc),
            )
            if exc.taken_over:
                self.skipped[run_id] = f"LeaseLost: {exc}"
        except StorageError as exc:
            # The journal failed under the drive: the run stays claimable (by this worker too).
            log.error("worker_drive_failed", worker=self.name, run_id=run_id, error=str(exc))
        except BideError as exc:
            self._skip(run_id, f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            self._skip(run_id, f"unexpected {type(exc).__name__}: {exc}")
        finally:
            await holding.release()
            self._active.pop(run_id, None)
            self._wake.set()

    async def _reconcile_halted(self) -> bool:
        """Try the reconcilers of halted runs whose next try is due (backoff per call): every
        halted run, earliest due first, whatever the number of runs halted before or after it.
        True if one settled a call (its run is ready to drive)."""
        any_settled = False
        clock = await self.journal.store.clock_ms()
        halted = [
            run_id
            for run_id, agent in await self._halted_runs()
            # A fixed agent's reconcilers judge only its own runs' calls (same name, other tool).
            if self.agent is None or agent == self.agent.name
        ]
        still = set(halted)
        for run_id in list(self._due):
            if run_id not in still:
                del self._due[run_id]  # no longer halted: resolved, resumed or ended
        due_first = sorted(halted, key=lambda run_id: self._due.get(run_id, 0) or 0)
        for run_id in due_first:
            if run_id in self.skipped or run_id in self._active or self._stopping.is_set():
                continue
            due = self._due.get(run_id, 0)
            if due is None or due > clock:
                continue  # nothing to reconcile in it, or not yet
            try:
                async with self._agent_for(run_id) as agent:
                    verdicts = await settle_run(self.journal, agent.tools, run_id)
            except CorruptJournal as exc:  # its records are damaged, not the journal failing
                self._skip(run_id, f"{type(exc).__name__}: {exc}")
                continue
            except StorageError:
                raise
            except BideError as exc:
                self._skip(run_id, f"{type(exc).__name__}: {exc}")
                continue
            except Exception as exc:
                self._skip(run_id, f"unexpected {type(exc).__name__}: {exc}")
                continue
            settled = [(c, v) for c, v in verdicts if v.outcome is not None]
            for call, verdict in verdicts:
                log.info(
                    "worker_reconciled",
                    worker=self.name,
                    run_id=run_id,
                    call_id=call.call.id,
                    said=verdict.brief(),
                    settled=verdict.outcome is not None,
                )
            if settled:
                any_settled = True
                self._due.pop(run_id, None)
                self._wake.set()  # it is ready: claim it now
            elif verdicts:
                self._due[run_id] = next_try_ms(verdicts) or clock + int(self.poll * 1000)
            else:
                # Nothing reconcilable now: none has a reconciler, or none is due yet. Look again
                # when the earliest is due, as its last try journaled (another drive's try, maybe),
                # else later.
                state = await self.journal.require(run_id)
                idle = clock + int(RECONCILE_IDLE * 1000)
                self._due[run_id] = min(due_ms(state) or idle, idle)
        return any_settled

    async def _halted_runs(self) -> list[tuple[str, str | None]]:
        """Every halted run of the journal with its agent's name, read a page at a time, at
        most every ``RECONCILE_SCAN`` seconds (in between, the runs read last)."""
        now = time.monotonic()
        if self._halted is not None and now - self._scanned_at < RECONCILE_SCAN:
            return self._halted
        halted: list[tuple[str, str | None]] = []
        cursor: str | None = None
        while True:
            page = await self.journal.list_runs(
                status="halted", limit=RECONCILE_PAGE, before=cursor
            )
            halted += [(row.run_id, row.agent) for row in page.runs]
            cursor = page.next_cursor
            if cursor is None:
                break
        self._halted, self._scanned_at = halted, now
        return halted

    def _agent_for(self, run_id: str) -> AbstractAsyncContextManager[Agent[Any]]:
        if self.agent is not None:
            return contextlib.nullcontext(self.agent)
        return _SpecAgent(self, run_id)

    def _report(self, run_id: str, result: RunResult[Any], seconds: float) -> None:
        status = result.status.value
        if status == "running":  # the worker is stopping: the run stays for the next one
            log.info("worker_yielded", worker=self.name, run_id=run_id)
            return
        self.finished[run_id] = status
        fields: dict[str, Any] = {"worker": self.name, "run_id": run_id, "status": status}
        if result.halts:
            fields["halted_on"] = ", ".join(f"{h.call_id} {h.tool}" for h in result.halts)
        log.info("worker_finished", **fields, ms=round(seconds * 1000))

    def _skip(self, run_id: str, why: str) -> None:
        self.skipped[run_id] = why
        log.error("worker_skipped_run", worker=self.name, run_id=run_id, error=why)

    async def _drain(self) -> None:
        if not self._active:
            return
        self._yield.set()
        tasks = list(self._active.values())
        _, late = await asyncio.wait(tasks, timeout=self.grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _SpecAgent:
    """The agent a run journaled (its spec), opened for one drive."""

    def __init__(self, worker: Worker, run_id: str):
        self.worker = worker
        self.run_id = run_id
        self._cm: AbstractAsyncContextManager[Agent[Any]] | None = None

    async def __aenter__(self) -> Agent[Any]:
        start = await self.worker.journal.store.get(self.run_id, R.START)
        spec = start.payload.get("spec") if start is not None else None
        if not isinstance(spec, str) or not spec:
            raise ConfigError(
                f"run {self.run_id!r} journaled no agent spec: drive it with "
                "`resume RUN_ID --agent MODULE:ATTR`, or give the worker --agent",
                run_id=self.run_id,
            )
        assert self.worker.open_agent is not None
        self._cm = self.worker.open_agent(spec)
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._cm is not None
        return await self._cm.__aexit__(*exc)
