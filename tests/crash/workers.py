"""Worker schedules: the runs are submitted, and ``python -m runtime worker`` processes drive them.

A round starts the schedule's workers (``--exit-when-idle``) and waits for them to exit by
themselves; a worker SIGKILLed at its crash point or at a seeded random moment is restarted in its
place, as a supervisor would. A round that ends with a run halted is judged and reconciled as for
``run``/``resume`` schedules (``_Attempt._on_halt``, which marks the run ready for the next
round's workers); every check of the harness applies after the last round.
"""

from __future__ import annotations

import asyncio
import json

from runtime import Journal
from tests.crash import agents
from tests.crash.harness import Child, _Attempt

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
        async with self.harness.slots:
            rounds = await asyncio.gather(*(self._slot(i, plan[i]) for i in range(self.s.workers)))
        return [child for children in rounds for child in children]

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
        words = ["worker", "--name", name, "--concurrency", str(CONCURRENCY)]
        words += ["--poll", str(POLL), "--lease-ttl", str(LEASE_TTL), "--grace", "5"]
        words += ["--exit-when-idle", str(idle)]
        # Without their own hosts the workers share this machine's name: a killed worker's
        # leases are taken over at once, because its pid is gone.
        env = {"BIDE_HOST": f"crash-host-{host or i}"} if s.hosts else {}
        return await self._spawn(
            name, self._cli(words), crash=crash, kill=kill, slot=False, extra_env=env
        )

    async def _check_exits(self, children: list[Child]) -> bool:
        """A worker exits 0 once idle, or dies of a kill we caused; it never gives up a run
        but when another owner took it over (``LeaseLost``: the fencing at work)."""
        ok = True
        for child in children:
            if "MUTANT-SEAM-MISSING" in child.err:
                raise RuntimeError(f"{child.label}: {child.last_error()}")
            for event in _events(child.err):
                if event.get("event") == "worker_drive_failed" or (
                    event.get("event") == "worker_skipped_run"
                    and not str(event.get("error", "")).startswith("LeaseLost")
                ):
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
