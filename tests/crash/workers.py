"""Worker schedules: the runs are submitted, and ``python -m runtime worker`` processes drive them.

A round starts the schedule's workers (``--exit-when-idle``) and waits for them to exit by
themselves; a worker SIGKILLed at its crash point or at a seeded random moment is restarted in its
place, as a supervisor would. A round that ends with a run halted is judged and reconciled as for
``run``/``resume`` schedules (``_Attempt._on_halt``, which marks the run ready for the next
round's workers); every check of the harness applies after the last round.

With a declared reconciler (``Schedule.settle``) no one resolves anything: the workers'
reconcilers settle every halt, and the harness only restarts workers that exited. A stall
schedule SIGSTOPs the worker that holds a run for longer than its lease's TTL, so another worker
takes the run over, then SIGCONTs it: the fencing must keep the stopped one from writing again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

from runtime import Journal
from runtime.ownership import Lease
from runtime.reconcile import BACKOFF
from tests.crash import agents, journals
from tests.crash.harness import Child, _Attempt
from tests.crash.ledger import now_ms

__all__ = ["IDLE_EXIT", "LEASE_TTL", "POLL", "WorkerAttempt"]

LEASE_TTL = 2.0
"""Short, so that a worker on another host takes a killed one's runs over soon; long enough
that a live worker on a loaded machine renews in time (every third of it)."""
POLL = 0.1
IDLE_EXIT = 1.0
"""A worker exits once nothing was claimable for this long (plus the TTL when a killed
worker's leases must expire first: a lease of another host is not claimable before)."""
CONCURRENCY = 4
SUBMITTED_RECORDS = 2
"""A submitted run's header and start, committed before any worker drives it."""


class WorkerAttempt(_Attempt):
    """A schedule whose drives are rounds of worker processes (``Schedule.workers``)."""

    def __init__(self, *args: object, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.prior_records = SUBMITTED_RECORDS
        self.generation = 0
        self.pids: dict[int, str] = {}
        """The pid of every worker of the round that runs now, with its label."""
        self.stalls_left = 1 if self.s.stall else 0
        self.kills_around = 1 if self.s.kill_around else 0
        self.stalled_at: int | None = None
        self.stalled_pid: int | None = None
        self.stalled_epoch: int | None = None

    async def _drive(self, *, first: bool) -> list[Child]:
        """One round. The first submits the runs, and when a crash point is armed it is the
        armed worker alone (its site is checked before anyone drives the run again)."""
        if first:
            await self._submit()
            if self.s.crash is not None:
                async with self.harness.slots:
                    return [await self._worker(0, crash=self.s.crash, host="armed")]
        elif all(st == "completed" for st in (await self._statuses()).values()):
            return []  # the last round completed every run: no worker is needed again
        # Kill moments are measured first: the clean pool that measures them needs a slot.
        plan = await self._kill_plan()
        stall = await self._stall_plan()
        around = self.s.kill_around if self.kills_around > 0 else None
        self.kills_around = 0
        async with self.harness.slots:
            helpers = []
            if stall is not None:
                helpers.append(asyncio.create_task(self._stall(stall)))
            if around is not None:
                helpers.append(asyncio.create_task(self._kill_around(*around)))
            try:
                rounds = await asyncio.gather(
                    *(self._slot(i, plan[i]) for i in range(self.s.workers))
                )
            finally:
                for helper in helpers:
                    helper.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
        return [child for children in rounds for child in children]

    async def _stall_plan(self) -> float | str | None:
        """The stall of this round (the first only): a call to wait for, or the seconds after
        the run is first claimed (a fraction of a clean drive)."""
        if self.stalls_left <= 0 or self.s.stall is None:
            return None
        self.stalls_left -= 1
        how, _, what = self.s.stall.partition(":")
        if how == "begun":
            return what
        _, active = await self.harness.clean_seconds(self.s)
        return float(what) * active

    async def _stall(self, when: float | str) -> None:
        """SIGSTOP the worker that holds the first run, past its lease's TTL; then SIGCONT it."""
        run_id = self.s.run_ids[0]
        pid = None
        while pid is None:
            if isinstance(when, str):  # the process whose tool received that call's request
                pids = await asyncio.to_thread(self.ledger.begun_by, run_id, when)
                pid = pids[0] if pids else None
            else:  # that long after a worker claimed the run
                while (lease := await self._lease(run_id)) is None or not lease.live:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(when)
                lease = await self._lease(run_id)
                pid = lease.owner.pid if lease is not None and lease.live else None
                if pid is None:
                    return  # nobody holds it at that moment: the stall does not happen
            if pid is None:
                await asyncio.sleep(0.005)
        if pid not in self.pids:
            self.outcome.violate(f"the run is held by pid {pid}, none of this round's workers")
            return
        os.kill(pid, signal.SIGSTOP)
        self.stalled_at = now_ms()
        self.stalled_pid = pid
        self.outcome.stalled += 1
        try:
            lease = await self._lease(run_id)  # a read: the stopped one may hold the write lock
            if lease is not None and lease.owner.pid == pid:
                self.stalled_epoch = lease.epoch
            await asyncio.sleep(self.s.stall_seconds)
        finally:
            os.kill(pid, signal.SIGCONT)

    async def _kill_around(self, call_id: str, window_ms: float) -> None:
        """SIGKILL the worker whose tool received ``call_id``'s request, at a seeded moment up
        to ``window_ms`` after that."""
        run_id = self.s.run_ids[0]
        delay = self.rng.uniform(0, window_ms) / 1000
        while not (pids := await asyncio.to_thread(self.ledger.begun_by, run_id, call_id)):
            await asyncio.sleep(0.005)
        await asyncio.sleep(delay)
        pid = pids[0]
        if pid not in self.pids:
            self.outcome.violate(f"{call_id} reached pid {pid}, none of this round's workers")
            return
        self.external_kills[pid] = now_ms()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            self.external_kills.pop(pid, None)

    async def _lease(self, run_id: str) -> Lease | None:
        if not await journals.has_schema(self.db):
            return None
        return await (await self._open_journal()).lease(run_id)

    async def _submit(self) -> None:
        """One run through ``python -m runtime submit``; a pool's runs through its library
        twin here (a process per run would cost seconds and test nothing more)."""
        s = self.s
        if s.runs == 1:
            (run_id,) = s.run_ids
            words = ["submit", "--agent", s.spec, "--run-id", run_id, "--json"]
            child = await self._spawn(
                "submit", self._cli([*words, agents.run_input(run_id)]), measure=False
            )
            if child.code != 0:
                raise RuntimeError(f"submit exited {child.code}: {child.last_error()}")
            return
        agent = agents.native(s.script, self.settings)
        async with self.harness.creating:
            journal = await Journal(self.db).open()
        try:
            for run_id in s.run_ids:
                result = await agent.submit(
                    run_id, agents.run_input(run_id), journal=journal, spec=s.spec
                )
                if result.status.value != "submitted":
                    raise RuntimeError(f"submitting {run_id} gave {result.status.value}")
        finally:
            await journal.close()

    async def _kill_plan(self) -> list[list[float]]:
        """The schedule's random kills, dealt to the workers by the seed: each entry is the
        fraction of a clean worker's drive after which that worker (or its restart) dies."""
        plan: list[list[float]] = [[] for _ in range(self.s.workers)]
        if self.kills_left <= 0:
            return plan
        await self.harness.clean_seconds(self.s)
        while self.kills_left > 0:
            self.kills_left -= 1
            plan[self.rng.randrange(self.s.workers)].append(self.rng.random())
        return plan

    async def _slot(self, i: int, kills: list[float]) -> list[Child]:
        """Worker ``i`` of the round, restarted each time it is killed, until one exits."""
        children = []
        while True:
            kill = kills.pop(0) if kills else None
            child = await self._worker(i, kill=kill)
            children.append(child)
            if not child.sigkilled:
                return children

    async def _worker(
        self, i: int, *, crash: str | None = None, kill: float | None = None, host: str = ""
    ) -> Child:
        """Worker ``i`` of a round. On their own hosts, a worker restarted in its place keeps
        its host (a supervisor on that machine restarts it); the armed one has a host of its
        own, so the next worker must wait for the dead one's lease to expire."""
        s = self.s
        self.generation += 1
        name = f"w{i}.{self.generation}"
        idle = IDLE_EXIT + (LEASE_TTL if s.hosts else 0.0)
        if s.stall is not None:
            # The one that takes the stopped one's run over halts on its charge, and stays
            # until its reconciler's next try after the settle time.
            idle += (s.settle or 0.0) + BACKOFF[0]
        words = ["worker", "--name", name, "--concurrency", str(CONCURRENCY)]
        words += ["--poll", str(POLL), "--lease-ttl", str(LEASE_TTL), "--grace", "5"]
        words += ["--exit-when-idle", str(idle)]
        # Without their own hosts the workers share this machine's name: a killed worker's
        # leases are taken over at once, because its pid is gone.
        env = {"BIDE_HOST": f"crash-host-{host or i}"} if s.hosts else {}
        return await self._spawn(
            name,
            self._cli(words),
            crash=crash,
            kill=kill,
            slot=False,
            extra_env=env,
            started=lambda pid: self.pids.__setitem__(pid, name),
        )

    def _check_expectations(self) -> None:
        super()._check_expectations()
        if "settled" in self.s.expect and not (
            self.outcome.settled_found + self.outcome.settled_absent
        ):
            self.outcome.violate("expected a reconciler to settle a halt; none did")
        if "in_round" in self.s.expect and self.halted_rounds:
            self.outcome.violate(
                f"{self.halted_rounds} round(s) of workers exited leaving a run halted: no live "
                "worker tried its reconciler again when the journal said it was due"
            )
        if self.s.stall is not None:
            self._check_stall()

    def _check_stall(self) -> None:
        """The stopped worker lost the run: another owner wrote under a newer epoch, and the
        stopped one began no side effect once it was stopped (its marker would be fenced off)."""
        o = self.outcome
        if self.stalled_at is None or self.stalled_pid is None:
            if "stalled" in self.s.expect:
                o.violate("expected a worker to be stopped while it held the run; none was")
            return
        if self.stalled_epoch is None:
            o.violate(f"pid {self.stalled_pid} was stopped, and the run's lease was not its own")
            return
        run_id = self.s.run_ids[0]
        newer = [e for e in self._epochs(run_id) if e > self.stalled_epoch]
        o.taken_over += bool(newer)
        if not newer and "stalled" in self.s.expect:
            # (Stopped at a random moment it may hold the journal's write lock: then nobody can
            # take the run over until it runs again, and it may keep its lease.)
            o.violate(
                f"nobody took the run over from the stopped worker (epoch {self.stalled_epoch}) "
                f"in {self.s.stall_seconds:g} s"
            )
        for call_id, tool, pid, ms in self.ledger.begun_rows(run_id):
            if pid == self.stalled_pid and tool == "charge" and ms > self.stalled_at:
                o.violate(f"the stopped worker began {call_id} (a charge) after it was stopped")

    def _epochs(self, run_id: str) -> list[int]:
        assert self.final_state is not None
        return [
            e
            for r in self.final_state.records
            if isinstance(r.payload, dict) and isinstance(e := r.payload.get("epoch"), int)
        ]

    async def _check_exits(self, children: list[Child]) -> bool:
        """A worker exits 0 once idle, or dies of a kill we caused; it never gives up a run
        but when its lease ended (``worker_lease_lost``: taken over, or expired before it was
        renewed; the fencing at work), and then leaves it claimable."""
        ok = True
        for child in children:
            if "MUTANT-SEAM-MISSING" in child.err:
                raise RuntimeError(f"{child.label}: {child.last_error()}")
            for event in _events(child.err):
                if event.get("event") == "worker_lease_lost":
                    self.outcome.lease_lost += 1
                if event.get("event") in ("worker_drive_failed", "worker_skipped_run"):
                    self.outcome.violate(
                        f"{child.label} gave up {event.get('run_id')}: {event.get('error')}"
                    )
                    ok = False
            if child.sigkilled:
                if not child.kill_expected:
                    self.outcome.violate(f"{child.label} died of SIGKILL with nothing armed")
                    ok = False
            elif child.code != 0:
                self.outcome.violate(f"{child.label} exited {child.code}: {child.last_error()}")
                ok = False
        return ok


def _events(err: str) -> list[dict[str, object]]:
    events = []
    for line in err.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events
