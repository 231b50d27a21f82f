"""Running one crash schedule: real CLI children, real SIGKILL, then the checks of the guarantee.

A schedule starts a run in a fresh ``python -m runtime`` process with a crash armed (or kills it
at a seeded random moment), resumes it with ``python -m runtime resume`` until it completes or
halts, lets the reconciler resolve each halt from the ledger, and drives it to completion. Then
every call is checked against the ledger (``tests/crash/ledger.py``) and the journal against
itself. Each broken promise is a violation, with the schedule's seed to replay it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import json
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime import Journal, Resolution, Safety, sessions
from runtime.loop import replay
from runtime.state import CallState, RunState
from runtime.stops import waiting_on
from runtime.tools import idempotency_key_for
from tests.conftest import child_env
from tests.crash import agents, journals
from tests.crash.ledger import Execution, Ledger, now_ms

ROOT = agents.ROOT
MAX_DRIVES = 64
CHILD_TIMEOUT = 120.0
SIGKILLED = -signal.SIGKILL
JOBS = int(os.environ.get("BIDE_CRASH_JOBS", "0")) or max(2, os.cpu_count() or 2)
ANCHORS = ('"event": "run_started"', '"event": "run_resumed"', '"event": "drive_started"')
"""Log lines after which a child is driving: random kills are timed from the first of them."""
NOT_BY_A_DRIVE = frozenset({"header", "decision", "answer", "cancel", "reconcile", "signal"})
"""Record kinds the store, a person's verb or a reconciler outside a drive may write under no
lease (so may resolutions: results whose payload says ``resolved``)."""
IDLE = ('"event": "worker_idle"', '"event": "worker_stopped"')
"""A worker's lines once it drives nothing: not part of how long a clean drive takes."""


SESSION, PRELUDE = "s", "first"
"""A session schedule's session, and the run of its first message."""


@dataclass(frozen=True)
class Schedule:
    """One way to crash one run (or several), and what its checks must have seen happen."""

    group: str
    name: str
    seed: int
    script: str = "mixed"
    transport: str = "native"
    crash: str | None = None
    """``BIDE_CRASH`` for the first drive: the child must die of it."""
    kills: int = 0
    """How many drives to SIGKILL at a seeded uniform moment across a clean drive's duration."""
    from_spawn: bool = False
    """Time those kills across the whole clean child, imports and journal creation included,
    rather than from its first driving log line (where records start to be written)."""
    jitter_ms: float = 0.0
    slow: tuple[tuple[str, float], ...] = ()
    kill_on_begun: str | None = None
    """SIGKILL the first drive as soon as this call's request reached its tool."""
    resolve_crashes: tuple[str, ...] = ()
    """Crash specs for ``python -m runtime resolve`` children, one each, before reconciling."""
    runs: int = 1
    """More than one: a single driver process drives them all at once (asyncio.gather)."""
    drivers: int = 1
    """Two: every resume is two processes driving the run at the same time."""
    expect: frozenset[str] = frozenset()
    """What must be seen, so that a pass is not vacuous: halt, rerun, retry, outlived."""
    mutant: str | None = None
    workers: int = 0
    """More than none: the runs are submitted, and that many ``python -m runtime worker``
    processes drive them, each restarted when it is killed (``tests/crash/workers.py``)."""
    hosts: bool = False
    """Each worker claims to be on its own machine (``BIDE_HOST``): a killed worker's leases
    are taken over when they expire, not at once because its pid is gone."""
    backend: str = "sqlite"
    """Where the journal lives: a SQLite file, or a fresh PostgreSQL database
    (``tests/crash/journals.py``)."""
    settle: float | None = None
    """Set: the charge declares a reconciler that looks it up in the ledger by its idempotency
    key, with this settle time, and no person resolves anything: the workers' reconcilers
    settle every halt (worker schedules only)."""
    stall: str | None = None
    """SIGSTOP the worker that holds the run past its lease's TTL, then SIGCONT it: ``begun:c3``
    as soon as that call's request reached its tool, ``at:0.4`` at that fraction of a clean
    drive (worker schedules only)."""
    stall_seconds: float = 0.0
    history: int | None = None
    """Set: drives keep their settled turns in a history chunk every that many turns, so that
    resumes start from chunks (``runtime.history``)."""
    session: bool = False
    """Set: the run is the second message of a session, whose first message (``PRELUDE``) runs
    cleanly before it; every model request of the run must be shown that first message's
    exchange, the same after every crash."""
    kill_around: tuple[str, float] | None = None
    """(call id, ms): SIGKILL the worker whose tool received that call's request, at a seeded
    moment up to that many ms after it: before its effect, during it, or after it (worker
    schedules only)."""

    @property
    def spec(self) -> str:
        prefix = "mcp_" if self.transport == "mcp" else ""
        return f"tests.crash.agents:{prefix}{self.script}"

    @property
    def waits(self) -> bool:
        """The run's tools wait (``agents.waits``): the harness sends its signal, lets its
        timer come, and checks each was taken once."""
        return self.script == "waits"

    @property
    def person(self) -> bool:
        """Whether halts wait for a person (the harness's ledger reconciler), not a declared one."""
        return self.settle is None

    @property
    def run_ids(self) -> list[str]:
        return ["r"] if self.runs == 1 else [f"r{i}" for i in range(self.runs)]

    @property
    def tree(self) -> bool:
        """The run is a parent whose call drives a child run (``agents.TREE_CHILD``): the
        child's records, halts and charge are checked as the parent's are."""
        return self.script == "tree"

    @property
    def every_run(self) -> list[str]:
        """The schedule's runs and, for a tree, its child run."""
        return [*self.run_ids, agents.TREE_CHILD] if self.tree else self.run_ids

    def under(self, mutant: str) -> Schedule:
        return dataclasses.replace(self, mutant=mutant)

    def replay(self) -> str:
        mutant = f"BIDE_CRASH_MUTANT={self.mutant} " if self.mutant else ""
        return (
            f"{mutant}BIDE_CRASH_SEED={self.seed} .venv/bin/python -m pytest "
            "tests/crash/test_replay.py"
        )


@dataclass
class Outcome:
    """What one schedule saw; the report adds these up by group."""

    schedule: Schedule
    directory: Path
    violations: list[str] = field(default_factory=list)
    max_fired: int = 0
    misses: int = 0
    halts: int = 0
    reruns: int = 0
    retries: int = 0
    duplicates: int = 0
    kills: int = 0
    drives: int = 0
    outlived: bool = False
    raced: bool = False
    """Two drivers at once ended one completed and one halted: one lost the race to fire."""
    settled_found: int = 0
    """Halts a declared reconciler settled "succeeded" (it found the charge)."""
    settled_absent: int = 0
    """Halts a declared reconciler settled "not executed" (absent, past its settle time)."""
    stalled: int = 0
    """Workers SIGSTOPped past their lease's TTL (then SIGCONTed)."""
    taken_over: int = 0
    """Stopped workers whose run another owner took over (a newer epoch wrote)."""
    lease_lost: int = 0
    """Drives that lost their run to a newer owner (the fencing said so)."""
    refused: int = 0
    """Drivers refused because another held the run's lease (two drivers at once)."""
    signalled: int = 0
    """Signals the harness sent to a run waiting for one (``agents.waits``)."""
    timers: int = 0
    """Times the harness let a waiting run's timer come."""
    seconds: float = 0.0

    def violate(self, text: str) -> None:
        self.violations.append(text)

    def describe(self) -> str:
        s = self.schedule
        lines = [f"{s.name} (seed {s.seed}; journal and logs in {self.directory})"]
        lines += [f"  - {v}" for v in self.violations]
        lines.append(f"  replay: {s.replay()}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Child:
    label: str
    code: int | None
    out: str
    err: str
    killed_at_ms: int | None = None
    """When the harness sent SIGKILL (a random kill, or a kill mid-call)."""
    armed: bool = False
    """A crash point was armed in it."""

    @property
    def kill_expected(self) -> bool:
        return self.armed or self.killed_at_ms is not None

    @property
    def sigkilled(self) -> bool:
        return self.code == SIGKILLED

    def last_error(self) -> str:
        lines = [line for line in self.err.splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"(no stderr; exit {self.code})"


class Harness:
    """Runs schedules in a base directory, at most ``jobs`` child processes at a time."""

    def __init__(self, base: Path, *, jobs: int = JOBS):
        self.base = base
        self.slots = asyncio.Semaphore(jobs)
        self._durations: dict[tuple[Any, ...], tuple[float, float]] = {}
        self._measuring: dict[tuple[Any, ...], asyncio.Lock] = {}
        self.clean: list[Outcome] = []
        self.creating = asyncio.Lock()
        """Held while this process creates a journal: two Alembic upgrades in one process must
        not overlap (``test_migrations_at_once.py``)."""

    async def run_all(self, schedules: Sequence[Schedule]) -> list[Outcome]:
        return list(await asyncio.gather(*(self.run(s) for s in schedules)))

    async def run(self, schedule: Schedule) -> Outcome:
        directory = self.base / _slug(f"{schedule.name}-{schedule.mutant or 'sound'}")
        directory.mkdir(parents=True, exist_ok=False)
        return await _attempt(self, schedule, directory).go()

    async def clean_seconds(self, schedule: Schedule) -> tuple[float, float]:
        """How long a clean drive of this configuration takes: from spawn to exit, and from its
        first driving log line to its last (measured once, by a clean schedule that is checked
        like any other)."""
        key = (
            schedule.transport,
            schedule.script,
            schedule.jitter_ms,
            schedule.runs,
            schedule.workers,
            schedule.hosts,
            schedule.backend,
            schedule.settle,
            schedule.history,
        )
        lock = self._measuring.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._durations:
                clean = dataclasses.replace(
                    schedule,
                    name=f"clean {schedule.transport} {schedule.script} x{schedule.runs}"
                    + (f" by {schedule.workers} workers" if schedule.workers else "")
                    + (" on their own hosts" if schedule.hosts else "")
                    + (f" (settle {schedule.settle:g} s)" if schedule.settle is not None else "")
                    + (" on PostgreSQL" if schedule.backend == "postgres" else ""),
                    crash=None,
                    stall=None,
                    kills=0,
                    kill_on_begun=None,
                    resolve_crashes=(),
                    drivers=1,
                    expect=frozenset(),
                    mutant=None,
                )
                attempt = _attempt(self, clean, self.base / _slug(clean.name))
                attempt.directory.mkdir(parents=True, exist_ok=False)
                outcome = await attempt.go()
                self.clean.append(outcome)
                wall, active = attempt.first_clean or (1.0, 0.05)
                self._durations[key] = (wall, max(active, 0.05))
            return self._durations[key]


def _attempt(harness: Harness, schedule: Schedule, directory: Path) -> _Attempt:
    if not schedule.workers:
        return _Attempt(harness, schedule, directory)
    # Imported here: the worker schedules build on this module's _Attempt.
    from tests.crash.workers import WorkerAttempt

    return WorkerAttempt(harness, schedule, directory)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", text).strip("_")[:120]


class _Attempt:
    """One schedule being run: its files, its children, its checks."""

    def __init__(self, harness: Harness, schedule: Schedule, directory: Path):
        self.harness = harness
        self.s = schedule
        self.directory = directory
        self.db = ""
        """The journal's location (``--db``), set by ``go`` for the schedule's lifetime."""
        self.ledger_path = directory / "ledger.db"
        self.lock = directory / "servers.lock"
        self.outcome = Outcome(schedule, directory)
        self.rng = random.Random(schedule.seed)
        self.kills_left = schedule.kills
        self.children = 0
        self.first_clean: tuple[float, float] | None = None
        self.kill_times: list[int] = []
        self.halted_rounds = 0
        """Drives (rounds of workers) that ended with a run halted."""
        self.external_kills: dict[int, int] = {}
        """Pids the harness SIGKILLed itself (not through ``_spawn``'s killer), with when."""
        self.final_state: RunState | None = None
        """The first run's records once it completed (for the checks of subclasses)."""
        self._journal: Journal | None = None
        self.resolve_crashes = list(schedule.resolve_crashes)
        self.halted_seen: set[tuple[str, str, object]] = set()
        """(run, call, attempt or driver) of every halt seen."""
        self.prior_records = 0
        """Records committed before the first armed child started (a submitted run's header
        and start): its K-th write is the journal's (prior + K)-th record."""
        self.settings = agents.Settings(
            ledger=str(self.ledger_path),
            jitter_ms=schedule.jitter_ms,
            seed=str(schedule.seed),
            slow=dict(schedule.slow),
            settle=schedule.settle,
            history=schedule.history,
        )

    # --- the schedule ----------------------------------------------------------------------

    async def go(self) -> Outcome:
        started = time.monotonic()
        self.ledger = Ledger(self.ledger_path)
        try:
            async with journals.located(self.s.backend, self.directory) as self.db:
                try:
                    await self._schedule()
                finally:
                    if self._journal is not None:
                        await self._journal.close()
                        self._journal = None
        except Exception as exc:  # a harness failure is reported as one, never as a pass
            self.outcome.violate(f"harness error: {type(exc).__name__}: {exc}")
        self.outcome.seconds = time.monotonic() - started
        return self.outcome

    async def _schedule(self) -> None:
        s, o = self.s, self.outcome
        if s.session and not await self._prelude():
            return
        first = await self._drive(first=True)
        if s.crash is not None and not all(c.sigkilled for c in first):
            codes = ", ".join(f"{c.label}: exit {c.code}" for c in first)
            o.violate(
                f"stale schedule: {s.crash} is armed and the child did not die of it ({codes})"
            )
            return
        if s.kill_on_begun is not None and not all(c.killed_at_ms for c in first):
            o.violate(f"the agent was not killed while {s.kill_on_begun} was in flight")
            return
        if not await self._check_exits(first) or o.violations:
            return
        if s.crash is not None and s.runs == 1 and not s.tree:
            # (A tree's hits count over both runs in one process: the stale-schedule check
            # above says each one fired, and the checks after completion what it left.)
            await self._check_site(s.crash)
        self.halted_rounds += any(st == "halted" for st in (await self._statuses()).values())
        for _ in range(MAX_DRIVES):
            children = await self._drive(first=False)
            if not await self._check_exits(children) or o.violations:
                return
            status = await self._statuses()
            if all(st == "completed" for st in status.values()):
                break
            if self.s.waits and any(st == "waiting" for st in status.values()):
                await self._on_wait()
            # A halt is judged after a drive that ended by itself: then every other call of the
            # halted turn has finished, and resuming again must add nothing.
            killed = any(c.sigkilled for c in children)
            halted = any(st == "halted" for st in status.values())
            self.halted_rounds += halted
            if halted and not killed and (not await self._on_halt(status) or o.violations):
                return
        else:
            o.violate(f"not completed after {MAX_DRIVES} drives: {await self._statuses()}")
            return
        await self._final_checks()

    async def _prelude(self) -> bool:
        """The session's first message, run to completion before the schedule's run."""
        words = ["run", "--run-id", PRELUDE, "--agent", self.s.spec, "--session", SESSION]
        child = await self._spawn(
            "prelude", self._cli([*words, "--json", agents.run_input(PRELUDE)])
        )
        if child.code != 0:
            self.outcome.violate(f"the session's first message exited {child.code}: {child.err}")
            return False
        return True

    # --- children --------------------------------------------------------------------------

    async def _drive(self, *, first: bool) -> list[Child]:
        """One drive of the schedule's runs: ``run`` first, ``resume`` after (two at once for two
        drivers; the multi driver for several runs). Returns the children, finished."""
        s = self.s
        crash = s.crash if first else None
        kill = self._kill_fraction()
        if s.runs > 1:
            argv = ["-m", "tests.crash.multi", "--db", self.db, "--agent", s.spec, *s.run_ids]
            return [await self._spawn("multi", argv, crash=crash, kill=kill)]
        (run_id,) = s.run_ids
        # Killed before its start record was committed, a run has no input or agent to resume
        # with: the operator runs it again with the same input (see test_never_started.py).
        if first or (await self._state(run_id)).start is None:
            words = ["run", "--run-id", run_id, "--agent", s.spec, "--json"]
            if s.session:
                words += ["--session", SESSION]
            label, argv = (
                ("run" if first else "rerun"),
                self._cli([*words, agents.run_input(run_id)]),
            )
        else:
            label, argv = "resume", self._cli(["resume", run_id, "--json"])
        if s.drivers == 1 or first:
            on_begun = (run_id, s.kill_on_begun) if first and s.kill_on_begun else None
            return [await self._spawn(label, argv, crash=crash, kill=kill, on_begun=on_begun)]
        # The drivers start together: they take one slot as a pair, never one after the other.
        async with self.harness.slots:
            return list(
                await asyncio.gather(
                    *(self._spawn(f"{label}{i}", argv, slot=False) for i in range(s.drivers))
                )
            )

    def _cli(self, words: list[str]) -> list[str]:
        module = "tests.crash.launch" if self.s.mutant else "runtime"
        return ["-m", module, "--db", self.db, *words]

    def _kill_fraction(self) -> float | None:
        if self.kills_left <= 0:
            return None
        self.kills_left -= 1
        return self.rng.random()

    async def _spawn(
        self,
        label: str,
        argv: list[str],
        *,
        crash: str | None = None,
        kill: float | None = None,
        on_begun: tuple[str, str] | None = None,
        slot: bool = True,
        extra_env: dict[str, str] | None = None,
        measure: bool = True,
        started: Callable[[int], None] | None = None,
    ) -> Child:
        self.children += 1
        name = f"{self.children:02d}-{label}"
        env = child_env(**self.settings.to_env(), CRASH_SERVER_LOCK=str(self.lock))
        env.update(extra_env or {})
        env.pop("BIDE_DB", None)
        if crash:
            env["BIDE_CRASH"] = crash
        if self.s.mutant:
            env["BIDE_CRASH_MUTANT"] = self.s.mutant
        out_path, err_path = self.directory / f"{name}.out", self.directory / f"{name}.err"
        delay = 0.0
        if kill is not None:
            wall, active = await self.harness.clean_seconds(self.s)
            delay = kill * (wall if self.s.from_spawn else active)
        killed_at: int | None = None
        async with self.harness.slots if slot else contextlib.nullcontext():
            with open(out_path, "w") as out, open(err_path, "w") as err:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    *argv,
                    cwd=ROOT,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                )
            spawned = time.monotonic()
            if started is not None:
                started(proc.pid)
            killer = None
            if kill is not None:
                anchor = None if self.s.from_spawn else err_path
                killer = asyncio.create_task(self._kill_later(proc, anchor, delay))
            elif on_begun is not None:
                killer = asyncio.create_task(self._kill_on_begun(proc, *on_begun))
            try:
                code: int | None = await asyncio.wait_for(proc.wait(), CHILD_TIMEOUT)
            except TimeoutError:
                _kill(proc)
                code = await proc.wait()
                self.outcome.violate(f"{name} did not finish within {CHILD_TIMEOUT:.0f} s")
            wall = time.monotonic() - spawned
            if killer is not None:
                killer.cancel()
                try:
                    killed_at = await killer
                except asyncio.CancelledError:
                    killed_at = None
        if killed_at is None:
            killed_at = self.external_kills.pop(proc.pid, None)
        if measure and self.first_clean is None and code == 0 and kill is None and not crash:
            self.first_clean = (wall, _active_seconds(err_path) or 0.05)
        if killed_at is not None:
            self.kill_times.append(killed_at)
        if code == SIGKILLED:
            self.outcome.kills += 1
        self.outcome.drives += 1
        if self.s.transport == "mcp":
            await self._wait_for_servers()
        return Child(
            name, code, out_path.read_text(), err_path.read_text(), killed_at, crash is not None
        )

    async def _kill_later(self, proc: Any, anchor: Path | None, seconds: float) -> int | None:
        while anchor is not None and not _has_anchor(anchor):
            if proc.returncode is not None:
                return None
            await asyncio.sleep(0.005)
        await asyncio.sleep(seconds)
        return _kill(proc)

    async def _kill_on_begun(self, proc: Any, run_id: str, call_id: str) -> int | None:
        while await asyncio.to_thread(self.ledger.begun, run_id, call_id) == 0:
            if proc.returncode is not None:
                return None
            await asyncio.sleep(0.005)
        return _kill(proc)

    async def _wait_for_servers(self) -> None:
        """Wait until every MCP server of this schedule exited (each holds a shared lock)."""
        deadline = time.monotonic() + CHILD_TIMEOUT
        with open(self.lock, "a+") as lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(lock, fcntl.LOCK_UN)
                    return
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        self.outcome.violate("an MCP server outlived its agent by minutes")
                        return
                    await asyncio.sleep(0.01)

    async def _check_exits(self, children: list[Child]) -> bool:
        """Every exit must be a kill we caused, a completion or a halt (for the multi driver: every
        run completed or halted). Anything else is a violation that ends the schedule."""
        ok = True
        for child in children:
            if "MUTANT-SEAM-MISSING" in child.err:
                raise RuntimeError(f"{child.label}: {child.last_error()}")
            if child.sigkilled:
                if not child.kill_expected:
                    self.outcome.violate(f"{child.label} died of SIGKILL with nothing armed")
                    ok = False
                continue
            # Of two drivers started together, one may find the other holding the run's lease:
            # it is refused (exit 6, naming the owner) and drives nothing.
            refused = len(children) > 1 and child.code == 6 and "is being driven by" in child.err
            if refused:
                self.outcome.refused += 1
                continue
            # A tree's parent waits (exit 3) on a child that halted; a run of tools that wait
            # waits for its signal or its timer.
            if child.code not in ((0, 3, 4) if self.s.tree or self.s.waits else (0, 4)):
                self.outcome.violate(f"{child.label} exited {child.code}: {child.last_error()}")
                ok = False
                continue
            if self.s.runs == 1 and self.s.drivers == 1:
                await self._check_cli_answer(child)
        if len(children) > 1:
            if children and all(c.code == 6 for c in children):
                self.outcome.violate("every driver was refused: none drove the run")
                ok = False
            if sorted(c.code or 0 for c in children) == [0, 4]:
                self.outcome.raced = True
            for child in children:  # a driver that lost the race for a marker halted, safely
                for call_id in _halted_calls(child.out):
                    self.halted_seen.add((self.s.run_ids[0], call_id, child.label))
                    self.outcome.halts += 1
        return ok

    async def _check_cli_answer(self, child: Child) -> None:
        """A run or resume that exited 0 completed and 4 halted, naming each halted call."""
        try:
            answer = json.loads(child.out)
        except ValueError:
            self.outcome.violate(f"{child.label} printed no JSON result: {child.out[:200]!r}")
            return
        state = await self._state(self.s.run_ids[0])
        if child.code == 3 and self.s.waits:
            if answer.get("status") != "waiting" or state.status() != "waiting":
                self.outcome.violate(
                    f"{child.label} exited 3 with status {answer.get('status')}; the journal "
                    f"says {state.status()}"
                )
            return
        if child.code == 3:
            await self._check_waiting_parent(child, answer, state)
            return
        if child.code == 4:
            named = sorted(h["call_id"] for h in answer.get("halts", []))
            halted = sorted(c.call.id for c in state.halted_calls())
            if named != halted:
                self.outcome.violate(
                    f"{child.label} halted naming {named}; the journal's calls with an attempt "
                    f"and no result are {halted}"
                )
                return
        if child.code == 0 and answer.get("output") != agents.final_of(self.s.script):
            self.outcome.violate(
                f"{child.label} completed answering {answer.get('output')!r}, not "
                f"{agents.final_of(self.s.script)!r}"
            )
        want = "completed" if child.code == 0 else "halted"
        if answer.get("status") != want or state.status() != want:
            self.outcome.violate(
                f"{child.label} exited {child.code} with status {answer.get('status')}; the "
                f"journal says {state.status()}"
            )

    async def _check_waiting_parent(
        self, child: Child, answer: dict[str, Any], state: RunState
    ) -> None:
        """A tree's parent that exited 3 waits on its call of the child, and only because the
        child halted: the journal says both."""
        o = self.outcome
        waits = sorted(str(w.get("call_id")) for w in answer.get("waiting", []))
        kid = await self._state(agents.TREE_CHILD)
        if answer.get("status") != "waiting" or state.status() != "waiting":
            o.violate(
                f"{child.label} exited 3 with status {answer.get('status')}; the journal says "
                f"{state.status()}"
            )
        elif waits != [agents.TREE_CALL] or kid.status() != "halted":
            o.violate(
                f"{child.label}: the parent waits on {waits}; its child {agents.TREE_CHILD} is "
                f"{kid.status()} (a parent waits on its call of a halted child only)"
            )

    async def _check_site(self, crash: str) -> None:
        """The journal and the ledger right after the kill show that the point fired where its
        description says it is (``runtime/faults.py``)."""
        (run_id,) = self.s.run_ids
        state = await self._state(run_id)
        name, _, hit = crash.partition("@")
        k = int(hit or 1)
        records = len(state.records) - self.prior_records  # the header too
        markers = sum(len(c.markers) for c in state.calls.values())
        results = sum(len(c.results) for c in state.calls.values())
        executions = self.ledger.executions(run_id)
        fired = len(executions)
        asked = [n for n, _ in self.ledger.model_requests(run_id)]
        latest = [c for c in state.calls.values() if c.turn == len(state.turns)]
        # A turn commits with one record at most: a READ_ONLY call's result (it ran before),
        # a side effect's marker (it has not fired), or the end; alone before anything else.
        effects = {c.call.id for c in latest if c.plan.get("safety") != Safety.READ_ONLY.value}
        with_the_turn = sum(len(c.markers) + len(c.results) for c in latest) <= 1 and not any(
            e.call_id in effects for e in executions
        )
        site = {
            "model.after_answer": len(state.turns) == k - 1 and asked.count(k) == 1,
            "turn.before_record": len(state.turns) == k - 1,
            "turn.after_record": len(state.turns) == k and with_the_turn,
            "attempt.before_marker": markers < k,
            # Only a side effect is marked: the k-th marker's effect has not fired.
            "attempt.after_marker": markers >= k
            and sum(e.safety == Safety.SIDE_EFFECT.value for e in executions) < k,
            "tool.after_effect": fired >= k and results < fired,
            "tool.after_call": fired >= k and results < k,
            "result.after_record": results >= k,
            # The final answer commits with the end: neither is recorded yet.
            # (A typed answer is a call the runtime settles: its turn and result commit first.)
            "end.before_marker": len(state.turns)
            == len(agents.SCRIPTS[self.s.script]) - (self.s.script != "typed")
            and state.end is None,
            # A drive's first commit is its lease's, which holds no record.
            "writer.after_commit": k == 1 or records >= 1,
            "write.before_commit": records < k,
            "write.after_commit": records >= k,
        }.get(name, True)
        if not site:
            self.outcome.violate(
                f"{crash} fired elsewhere than it says: {len(state.turns)} turns, {records} "
                f"records, {markers} markers, {results} results, {fired} executions, model "
                f"asked for turns {asked}"
            )

    # --- halts -------------------------------------------------------------------------------

    async def _statuses(self) -> dict[str, str]:
        statuses = {r: (await self._state(r)).status() for r in self.s.run_ids}
        if self.s.tree and (await self._state(agents.TREE_CHILD)).start is not None:
            statuses[agents.TREE_CHILD] = (await self._state(agents.TREE_CHILD)).status()
        return statuses

    async def _open_journal(self) -> Journal:
        """The schedule's journal in this process, opened once the first child created it."""
        if self._journal is None:
            self._journal = await Journal(self.db, migrate=False).open()
        return self._journal

    async def _state(self, run_id: str) -> RunState:
        if self._journal is None and not await journals.has_schema(self.db):
            return RunState(run_id)  # killed before its journal was created: nothing to read
        state = await (await self._open_journal()).state(run_id)
        return state if state is not None else RunState(run_id)

    async def _on_halt(self, statuses: dict[str, str]) -> bool:
        """Check each halt, check that resuming it again adds nothing, then reconcile it."""
        for run_id, status in statuses.items():
            if status != "halted":
                continue
            state = await self._state(run_id)
            for cs in state.halted_calls():
                key = (run_id, cs.call.id, cs.attempt)
                if key not in self.halted_seen:
                    self.halted_seen.add(key)
                    self.outcome.halts += 1
                self._check_halted_call(run_id, cs)
            if not await self._resume_adds_nothing(run_id, "halted"):
                return False
            if self.s.person:
                await self._reconcile(run_id, state)
            else:
                await self._until_due(state)
        return True

    async def _on_wait(self) -> None:
        """A run of tools that wait (``agents.waits``): send the signal its receive waits for
        (under one id: sent again after a crash, it is one signal), or let its timer come."""
        (run_id,) = self.s.run_ids
        for stop in waiting_on(await self._state(run_id)):
            if stop.kind == "signal" and stop.signal == agents.GO:
                await (await self._open_journal()).signal(run_id, agents.GO, 1, signal_id="go-1")
                self.outcome.signalled += 1
            elif stop.due_at is not None:
                await asyncio.sleep(agents.LISTEN_TIMEOUT + 0.05)
                self.outcome.timers += 1

    def _check_waits(self, run_id: str, state: RunState) -> None:
        """The listen call was given the one signal sent, once, and its second receive timed
        out (each journaled once); its result says what it received."""
        o = self.outcome
        listen = state.calls.get("c3")
        if listen is None:
            o.violate(f"{run_id}: no listen call")
            return
        given = {n: r.payload for n, r in listen.received.items()}
        go = given.get(1, {})
        if go.get("signal") != f"signal/{agents.GO}/go-1" or not given.get(2, {}).get("timed_out"):
            o.violate(f"{run_id}/c3 was given {given}, not the go signal then its timeout")
        waits = [listen.waits[n].payload.get("what") for n in sorted(listen.waits)]
        if waits != ["receive", "receive", "sleep"]:
            o.violate(f"{run_id}/c3 journaled the waits {waits}, each once, in order")
        signals = [r for r in state.records if r.kind == "signal"]
        if len(signals) != 1:
            o.violate(f"{run_id}: {len(signals)} signal records, for one sent under one id")
        result = listen.result
        got = _unwrap(result.payload.get("value")) if result is not None else None
        if not isinstance(got, dict) or got.get("got") != 1:
            o.violate(f"{run_id}/c3 answered {got!r}, not what the signal carried")

    async def _until_due(self, state: RunState) -> None:
        """No person: wait until the halted calls' reconcilers are due again (as the journal says
        their last tries set), so that the next round's workers settle them."""
        assert self.s.settle is not None
        due = [
            int(last.payload["next_try_ms"])
            for cs in state.halted_calls()
            if (last := cs.last_reconcile) is not None
            and isinstance(last.payload.get("next_try_ms"), int)
        ]
        if due:
            wait = (min(due) - now_ms()) / 1000
            await asyncio.sleep(min(max(wait, 0.0), self.s.settle + 10.0))

    def _check_halted_call(self, run_id: str, cs: CallState) -> None:
        marker = cs.marker
        safety = cs.plan.get("safety")
        if marker is None or cs.result is not None:
            self.outcome.violate(f"{run_id}/{cs.call.id} is halted without a lone attempt marker")
        elif marker.payload.get("safety") != Safety.SIDE_EFFECT.value or safety != "side_effect":
            self.outcome.violate(
                f"{run_id}/{cs.call.id} halted, and it is {safety}, not a side effect"
            )
        fired = self._fired(run_id, cs.call.id)
        if len(fired) > 1:
            self.outcome.violate(f"{run_id}/{cs.call.id} fired {len(fired)} times (halted)")

    async def _resume_adds_nothing(self, run_id: str, want: str) -> bool:
        """Resume in this process (the library, a native agent on the same script): it must end
        as it was, with no new record and nothing run."""
        before_records = len((await self._state(run_id)).records)
        before_ledger = self.ledger.snapshot()
        # A build whose charge declares no reconciler: this resume must halt, not settle.
        quiet = dataclasses.replace(self.settings, jitter_ms=0, settle=None)
        agent = agents.native(self._script_of(run_id), quiet)
        result = await agent.resume(run_id, journal=await self._open_journal())
        after_records = len((await self._state(run_id)).records)
        if result.status.value != want:
            self.outcome.violate(f"resuming {want} {run_id} again gave {result.status.value}")
            return False
        if after_records != before_records or self.ledger.snapshot() != before_ledger:
            self.outcome.violate(
                f"resuming {want} {run_id} again wrote records ({before_records} -> "
                f"{after_records}) or ran something ({before_ledger} -> {self.ledger.snapshot()})"
            )
            return False
        return True

    def _script_of(self, run_id: str) -> str:
        return "tree_child" if self.s.tree and run_id == agents.TREE_CHILD else self.s.script

    async def _reconcile(self, run_id: str, state: RunState) -> None:
        """The reconciler: a halted charge is in the ledger (succeeded, with the value the tool
        returns) or it is not (not executed). A tree parent's call of its child halts only
        before its handle is journaled, so before the child run exists: not executed. Crash
        specs of the schedule go to CLI resolvers."""
        for cs in state.halted_calls():
            fired = self._fired(run_id, cs.call.id)
            if cs.call.name == agents.CHILD_TOOL:
                if (await self._state(agents.TREE_CHILD)).start is not None:
                    self.outcome.violate(
                        f"{run_id}/{cs.call.id} halted though its child run "
                        f"{agents.TREE_CHILD} exists: its resume must drive that child on"
                    )
                    resolution = Resolution.failed("its child run exists")
                else:
                    resolution = Resolution.not_executed()
            elif len(fired) > 1:
                resolution = Resolution.failed(f"fired {len(fired)} times")
            elif fired:
                resolution = Resolution.succeeded(self._answer(fired[0], cs))
            else:
                resolution = Resolution.not_executed()
            k = cs.attempt  # the attempt the ledger was read for
            while self.resolve_crashes:
                await self._crash_a_resolver(
                    run_id, cs.call.id, k, resolution, self.resolve_crashes.pop(0)
                )
            journal = await self._open_journal()
            recorded = await journal.resolve(
                run_id, cs.call.id, resolution, attempt=k, by="crash-reconciler", evidence="ledger"
            )
            again = await journal.resolve(
                run_id, cs.call.id, resolution, attempt=k, by="crash-reconciler", evidence="ledger"
            )
            if again:
                self.outcome.violate(f"resolving {run_id}/{cs.call.id} twice recorded it twice")
            if not recorded and not self.s.resolve_crashes:
                self.outcome.violate(f"{run_id}/{cs.call.id} was halted and its resolution a no-op")

    async def _crash_a_resolver(
        self, run_id: str, call_id: str, attempt: int, resolution: Resolution, crash: str
    ) -> None:
        how = {"value": ["--succeeded", json.dumps(resolution.value)]}.get(
            resolution.outcome, ["--not-executed"]
        )
        if resolution.outcome == "error":
            how = ["--failed", resolution.error or "failed"]
        words = ["resolve", run_id, call_id, "--attempt", str(attempt), *how]
        words += ["--by", "crash-resolver"]
        child = await self._spawn("resolve", self._cli(words), crash=crash)
        if not child.sigkilled:
            self.outcome.violate(
                f"stale schedule: {crash} is armed in `resolve` and it exited {child.code}: "
                f"{child.last_error()}"
            )
            return
        call = (await self._state(run_id)).calls[call_id]
        recorded = call.last_resolution is not None
        if recorded != (crash == "write.after_commit@1"):
            self.outcome.violate(
                f"`resolve` killed at {crash}: its resolution is "
                f"{'recorded' if recorded else 'not recorded'}"
            )

    def _answer(self, execution: Execution, cs: CallState) -> Any:
        """What the tool returned for this execution, as the agent received it."""
        n = cs.call.arguments.get("n")
        value = {"tool": execution.tool, "n": n, "execution": execution.id}
        if self.s.transport == "mcp":
            return [{"type": "text", "text": json.dumps(value, sort_keys=True)}]
        return value

    def _fired(self, run_id: str, call_id: str) -> list[Execution]:
        return [e for e in self.ledger.executions(run_id) if e.call_id == call_id]

    # --- after completion ----------------------------------------------------------------------

    async def _final_checks(self) -> None:
        o = self.outcome
        verdict = journals.integrity(self.db)
        if verdict != "ok":
            o.violate(f"journal integrity_check: {verdict}")
        journal = await self._open_journal()
        for run_id in self.s.run_ids:
            state = await self._state(run_id)  # loads and parses every record
            self._check_run(run_id, state)
            if self.s.session:
                await self._check_session(run_id)
            await self._check_replay(run_id, state)
            self._check_epochs(run_id, state)
            self._check_resolutions(run_id, state)
            if self.s.waits:
                self._check_waits(run_id, state)
            if self.final_state is None:
                self.final_state = state
            await self._resume_adds_nothing(run_id, "completed")
            row = await journal.run_row(run_id)
            if self.s.drivers == 1 and (row is None or row.status != "completed"):
                # Two drivers can leave it stale: see test_index.py (a known bug, xfail).
                o.violate(f"{run_id} completed and the run index says {row and row.status}")
        if self.s.tree:
            await self._check_tree()
        self._check_expectations()

    async def _check_tree(self) -> None:
        """The child run is checked as any run (its turns, its charge against the ledger, its
        replay, epochs and resolutions, a resume that adds nothing); then the tree: one child
        run for the parent's one call, and at most one charge in the whole ledger."""
        o, parent, kid = self.outcome, self.s.run_ids[0], agents.TREE_CHILD
        state = await self._state(kid)
        self._check_run(kid, state)
        await self._check_replay(kid, state)
        self._check_epochs(kid, state)
        self._check_resolutions(kid, state)
        await self._resume_adds_nothing(kid, "completed")
        link = state.start.get("parent") if state.start is not None else None
        if link != {"run_id": parent, "call_id": agents.TREE_CALL}:
            o.violate(f"{kid}'s start record names its parent as {link!r}")
        runs = (await (await self._open_journal()).list_runs(prefix=parent)).runs
        if sorted(r.run_id for r in runs) != sorted(self.s.every_run):
            o.violate(f"one call, one child run: the journal holds {[r.run_id for r in runs]}")
        charges = [e for e in self.ledger.executions() if e.tool == "charge"]
        o.max_fired = max(o.max_fired, len(charges))
        if len(charges) > 1:
            o.violate(f"the tree's one charge fired {len(charges)} times: {charges}")

    async def _check_session(self, run_id: str) -> None:
        """Every model request of the session's second message was shown the first message's
        whole exchange, the same in every process that drove it."""
        first = await self._state(PRELUDE)
        want = sessions.digest(sessions.exchange(first))
        shown = set(self.ledger.model_prefixes(run_id))
        if shown != {want}:
            self.outcome.violate(
                f"{run_id}: its model requests were shown {len(shown)} different session "
                "histories, or not the first message's exchange"
            )

    def _check_run(self, run_id: str, state: RunState) -> None:
        o = self.outcome
        name = self._script_of(run_id)
        script = agents.SCRIPTS[name]
        if state.end is None or state.end.payload.get("output") != agents.final_of(name):
            o.violate(f"{run_id} ended {state.end.payload if state.end else None}, not completed")
        if len(state.turns) != len(script):
            o.violate(f"{run_id} has {len(state.turns)} turns; the script has {len(script)}")
        # A second driver acts on what it read, which may be stale: it may ask for a turn or
        # re-run a retry-safe call the first already recorded (it then loses the key and uses the
        # winner's record). So these two checks hold for one driver at a time only.
        alone = self.s.drivers == 1
        # A worker SIGSTOPped mid-drive is a second driver once another took its run over: a
        # request it had in flight when it was stopped lands after the stop (its lease is
        # lost; ``_check_stall`` holds it to starting no effect).
        stale, stopped = getattr(self, "stalled_pid", None), getattr(self, "stalled_at", None)
        turns = {r.payload["n"]: r.created_ms for r in state.records if r.kind == "turn"}
        for n, pid, ms in self.ledger.model_request_rows(run_id):
            if pid == stale and stopped is not None and ms > stopped:
                continue
            if alone and n in turns and ms > turns[n]:
                o.violate(f"{run_id}: turn {n} was requested again after it was recorded")
        executions = self.ledger.executions(run_id)
        applied = self.ledger.applied(run_id)
        for call_id, cs in state.calls.items():
            mine = [e for e in executions if e.call_id == call_id]
            self._check_call(run_id, cs, mine, [a for a in applied if a[1] == call_id])
        known = set(state.calls)
        for e in executions:
            if e.call_id not in known:
                o.violate(f"{run_id}: {e.call_id} executed and no recorded turn asked for it")
            if alone and state.end is not None and e.started_ms > state.end.created_ms:
                o.violate(f"{run_id}/{e.call_id} ran after the run ended")

    async def _check_replay(self, run_id: str, state: RunState) -> None:
        """What a drive resumes from (its history chunks and the records after them) agrees
        with the fold of every record, and every chunk with the records it was made from."""
        o = self.outcome
        resumed = await replay((await self._open_journal()).store, run_id)
        told = [t.to_json() for t in resumed.turns], resumed.usage, resumed.status()
        if told != ([t.to_json() for t in state.turns], state.usage, state.status()):
            o.violate(f"{run_id}: the state a drive resumes from disagrees with its records")
        for anomaly in state.anomalies():
            if anomaly.startswith("history chunk"):
                o.violate(f"{run_id}: {anomaly}")
        if self.s.history is not None and state.chunked < len(state.turns) - self.s.history:
            o.violate(f"{run_id}: its turns up to {state.chunked} only are in history chunks")

    def _check_epochs(self, run_id: str, state: RunState) -> None:
        """One owner at a time, from the records alone: every record a drive writes carries its
        lease's epoch, and in commit order a run's epochs never go back (an older owner never
        wrote after a newer one took the run over)."""
        newest = 0
        for r in sorted(state.records, key=lambda r: r.seq):
            epoch = r.payload.get("epoch") if isinstance(r.payload, dict) else None
            leaseless = r.kind in NOT_BY_A_DRIVE or (r.kind == "result" and "resolved" in r.payload)
            if leaseless and epoch is None:
                continue
            if not isinstance(epoch, int) or isinstance(epoch, bool):
                self.outcome.violate(f"{run_id}: its {r.key} record carries no lease epoch")
            elif epoch < newest:
                self.outcome.violate(
                    f"{run_id}: {r.key} was written under epoch {epoch} after epoch {newest} "
                    "had written: two owners drove the run at once"
                )
            else:
                newest = epoch

    def _check_resolutions(self, run_id: str, state: RunState) -> None:
        """Who settled each halt. Under a declared reconciler no person did: each resolution
        names ``find_charge`` and its evidence (the call's key), and an *absent* settled only
        once its settle time had passed and, if a drive wrote it, under a newer lease than the
        attempt's."""
        o = self.outcome
        for cs in state.calls.values():
            for k, result in sorted(cs.results.items()):
                resolved = result.payload.get("resolved")
                if not isinstance(resolved, dict):
                    continue
                where = f"{run_id}/{cs.call.id} attempt {k}"
                if self.s.person:
                    if str(resolved.get("by", "")).startswith("reconciler"):
                        o.violate(f"{where} was settled by a reconciler nobody declared")
                    continue
                if (run_id, cs.call.id, k) not in self.halted_seen:  # settled by the drive
                    self.halted_seen.add((run_id, cs.call.id, k))  # that met the lone marker
                    o.halts += 1
                outcome = result.payload.get("outcome")
                key = idempotency_key_for(run_id, cs.call.id)
                if resolved.get("reconciler") != "find_charge" or resolved.get("by") != (
                    "reconciler find_charge"
                ):
                    o.violate(f"{where} was resolved by {resolved.get('by')!r}, not find_charge")
                if key not in str(resolved.get("evidence") or ""):
                    o.violate(f"{where}: its resolution's evidence {resolved!r} names no key {key}")
                if outcome == "value":
                    o.settled_found += 1
                    continue
                if outcome != "not_executed":
                    o.violate(f"{where}: find_charge settled it {outcome!r}")
                    continue
                o.settled_absent += 1
                marker = cs.markers.get(k)
                if marker is None:
                    o.violate(f"{where} was settled not executed and has no attempt marker")
                    continue
                settles_at = marker.created_ms + int(self.s.settle * 1000)  # type: ignore[operator]
                if result.created_ms < settles_at:
                    o.violate(
                        f"{where} was concluded absent {settles_at - result.created_ms} ms before "
                        "its settle time"
                    )
                epochs = (marker.payload.get("epoch"), result.payload.get("epoch"))
                if all(isinstance(e, int) for e in epochs) and epochs[1] <= epochs[0]:  # type: ignore[operator]
                    o.violate(
                        f"{where} was concluded absent under the attempt's own lease "
                        f"(epoch {epochs[0]}): its owner may still have been running it"
                    )

    def _check_call(
        self,
        run_id: str,
        cs: CallState,
        fired: list[Execution],
        applied: list[tuple[str, str, int]],
    ) -> None:
        o = self.outcome
        where = f"{run_id}/{cs.call.id}"
        safety = cs.plan.get("safety")
        result = cs.result
        if cs.plan.get("output"):  # a typed answer: the runtime settles it, nothing runs
            if result is None or fired or cs.markers:
                o.violate(f"{where} (the typed answer) ran, or has no result")
            return
        if cs.call.name == agents.CHILD_TOOL and self.s.tree:
            # The call's effect is its child run's charge (checked with the child's calls).
            want = {"child_run": agents.TREE_CHILD, "output": agents.CHILD_FINAL}
            got = result.payload.get("value") if result is not None else None
            if fired or safety != Safety.SIDE_EFFECT.value or got != want:
                o.violate(f"{where} ({safety}) ran {len(fired)} ledger tools, answered {got!r}")
            return
        if safety == Safety.SIDE_EFFECT.value:
            o.max_fired = max(o.max_fired, len(fired))
            if len(fired) > 1:
                o.violate(f"{where} ({cs.call.name}) fired {len(fired)} times")
        if result is None:
            o.violate(f"{where} has no result in a completed run")
            return
        if self.s.drivers == 1:
            late = [e for e in fired if e.started_ms > result.created_ms]
            if late:
                o.violate(f"{where} ran again after its result was recorded ({len(late)} times)")
        if safety == Safety.SIDE_EFFECT.value:
            if len(fired) > 1:
                pass  # said above
            elif not fired:
                o.misses += 1
                o.violate(f"{where} ({cs.call.name}) never fired in a completed run (a miss)")
            elif result.payload.get("outcome") == "value":
                got = _unwrap(result.payload.get("value"))
                if not isinstance(got, dict) or got.get("execution") != fired[0].id:
                    o.violate(f"{where}: recorded {got!r}; the ledger's execution is {fired[0].id}")
            return
        if cs.markers:
            o.violate(f"{where} is {safety} and has attempt markers")
        if any(h[:2] == (run_id, cs.call.id) for h in self.halted_seen):
            o.violate(f"{where} is {safety} and halted")
        if not fired:
            o.violate(f"{where} ({safety}) completed without running")
            return
        if safety == Safety.READ_ONLY.value:
            o.reruns += len(fired) - 1
            return
        o.retries += len(fired) - 1
        o.duplicates += max(0, len(applied) - 1)
        if len(applied) != 1:
            o.violate(f"{where}: the provider applied it {len(applied)} times")
        keys = sorted({str(e.key) for e in fired})
        if len(keys) > 1:
            o.violate(f"{where}: its {len(fired)} executions used {len(keys)} different keys")
        want = idempotency_key_for(run_id, cs.call.id)
        if keys != [want]:
            o.violate(f"{where}: executions used keys {keys}; its key is {want}")

    def _check_expectations(self) -> None:
        o, expect = self.outcome, self.s.expect
        if "halt" in expect and o.halts == 0:
            o.violate("expected a halt (an attempt without a result); none was seen")
        if "rerun" in expect and o.reruns == 0:
            o.violate("expected a READ_ONLY call to re-run after the crash; none did")
        if "retry" in expect and o.retries == 0:
            o.violate("expected an IDEMPOTENT call to be retried with its key; none was")
        if "outlived" in expect:
            self._check_outlived()
        if "race" in expect and not (o.raced or o.refused):
            o.violate(
                "expected two drivers to meet: one refused by the other's lease, or (the marker "
                "as the last line of defence) one completing and one halting"
            )

    def _check_outlived(self) -> None:
        """The server performed the effect after the agent it served was dead."""
        o = self.outcome
        killed = self.kill_times
        call_id = self.s.kill_on_begun
        fired = [e for e in self.ledger.executions() if e.call_id == call_id]
        if not killed or not fired:
            o.violate(f"expected {call_id}'s server to outlive the agent: killed {killed}")
            return
        o.outlived = fired[0].ms > killed[0]
        if not o.outlived:
            o.violate(
                f"{call_id}'s effect ({fired[0].ms}) landed before the agent was killed "
                f"({killed[0]}): the server did not outlive it"
            )


def _kill(proc: Any) -> int | None:
    if proc.returncode is not None:
        return None
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        return None
    return now_ms()


def _has_anchor(path: Path) -> bool:
    try:
        text = path.read_text()
    except OSError:
        return False
    return any(a in text for a in ANCHORS)


def _active_seconds(path: Path) -> float | None:
    """Seconds from a child's first driving log line to its last one, by their timestamps."""
    stamps: list[float] = []
    for line in path.read_text().splitlines():
        if not line.startswith("{") or any(e in line for e in IDLE):
            continue
        if stamps or any(a in line for a in ANCHORS):
            stamp = json.loads(line).get("timestamp")
            if stamp:
                stamps.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return stamps[-1] - stamps[0] if stamps else None


def _halted_calls(out: str) -> list[str]:
    """The calls a ``run --json`` or ``resume --json`` answer says it halted on."""
    try:
        answer = json.loads(out)
    except ValueError:
        return []
    return [str(h.get("call_id")) for h in answer.get("halts", [])]


def _unwrap(value: Any) -> Any:
    """A ledger tool's answer: the dict itself (native) or inside one MCP text block."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        try:
            return json.loads(value[0].get("text", ""))
        except ValueError:
            return value
    return value
