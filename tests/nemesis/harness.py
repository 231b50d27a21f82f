"""Running one nemesis schedule: real processes, faults on a seeded schedule, then the checks.

A schedule (``Schedule``: a family, a seed, a backend) is played by a ``Scene``: it starts
``python -m runtime`` children (drivers, workers, reconcilers, an operator's ``resolve`` and
``cancel``, the console over HTTP), injects the family's faults (SIGKILL, SIGSTOP past the lease,
wall-clock steps through ``faketime``, ``pg_terminate_backend``, a provider slower than the tool's
timeout, stale and repeated operator actions), and writes every step it took. ``check`` then
reads the external ledger (``tests/nemesis/book.py``) and the journal: at most one execution per
call, every resolution judging the attempt it is recorded for, every run ended or stopped with a
reason. A failure prints the seed and the steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.client
import os
import random
import signal
import socket
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from runtime import Journal, faults
from runtime.errors import ConfigError
from runtime.state import RunState
from tests.conftest import child_env
from tests.crash import journals
from tests.nemesis.book import Book, Provider

__all__ = ["Child", "Outcome", "Scene", "Schedule", "play"]

ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 60.0
POLL = 0.1
CONSOLE_TOKEN = "nemesis-console-token-0123456789"
ENDED = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Schedule:
    """One attack: its family (``tests/nemesis/families.py``), seed and journal backend."""

    family: str
    seed: int
    backend: str = "sqlite"

    @property
    def name(self) -> str:
        return f"{self.family}-{self.backend}-{self.seed}"

    def replay(self) -> str:
        return (
            f"NEMESIS_FAMILY={self.family} NEMESIS_SEED={self.seed} NEMESIS_BACKEND={self.backend} "
            ".venv/bin/python -m pytest tests/nemesis/test_replay.py"
        )


@dataclass
class Outcome:
    schedule: Schedule
    directory: Path
    violations: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    """What the schedule made happen (a stale action after the next attempt, a stopped worker
    that woke...): a family names what it needs, so that a pass is not vacuous."""
    max_fired: int = 0
    seconds: float = 0.0
    statuses: dict[str, str] = field(default_factory=dict)

    def violate(self, text: str) -> None:
        self.violations.append(text)

    def describe(self) -> str:
        s = self.schedule
        lines = [f"{s.name} (seed {s.seed}; files in {self.directory})"]
        lines += [f"  - {v}" for v in self.violations]
        lines.append("  schedule:")
        lines += [f"    {step}" for step in self.steps]
        lines.append(f"  replay: {s.replay()}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Action:
    """An operator's action: the attempt the operator saw, and what they said of it."""

    actor: str
    run_id: str
    call_id: str
    attempt: int
    outcome: str


class Child:
    """One child process of the schedule, its output in files named by its label."""

    def __init__(self, label: str, proc: asyncio.subprocess.Process, err: Path, out: Path):
        self.label = label
        self.proc = proc
        self.err = err
        self.out = out
        self.target = proc.pid
        """The Python process: ``faketime`` runs it as its child, and waits for it."""

    @property
    def pid(self) -> int:
        return self.target

    async def find_target(self) -> None:
        """Under ``faketime``: the pid of the Python child it started (signals go to it)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        for _ in range(500):
            with contextlib.suppress(OSError):
                pids = children.read_text().split()
                if pids:
                    self.target = int(pids[0])
                    return
            if self.proc.returncode is not None:
                return
            await asyncio.sleep(0.01)

    @property
    def code(self) -> int | None:
        return self.proc.returncode

    async def wait(self, within: float = CHILD_TIMEOUT) -> int | None:
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            return None

    def signal(self, sig: int) -> None:
        if self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.target, sig)

    def stopped(self) -> bool:
        """Whether the process is stopped (SIGSTOP), by its state in ``/proc``."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_bytes()
        except OSError:
            return False
        return stat[stat.rfind(b")") + 2 :].split()[0] in (b"T", b"t")

    def last_error(self) -> str:
        lines = [line for line in self.err.read_text().splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"(no stderr; exit {self.code})"


def stop_supported() -> bool:
    """Whether this build's ``BIDE_CRASH`` takes ``:stop`` (else ``tests/nemesis/launch.py``)."""
    try:
        faults.arm("attempt.after_marker@1:stop")
    except ConfigError:
        return False
    finally:
        faults.arm(None)
    return True


class Scene:
    """One schedule being played: its journal, ledger, provider, children and steps."""

    def __init__(self, schedule: Schedule, directory: Path, db: str, outcome: Outcome):
        self.s = schedule
        self.directory = directory
        self.db = db
        self.outcome = outcome
        self.rng = random.Random(f"{schedule.family}/{schedule.seed}/{schedule.backend}")
        self.book = Book(directory / "ledger.db")
        self.started = time.monotonic()
        self.children: list[Child] = []
        self.actions: list[Action] = []
        self.runs: list[str] = ["r"]
        self.ttl = 1.0
        self.delay = 0.2
        """Seconds the provider takes to commit a charge after its request arrived."""
        self.env: dict[str, str] = {}
        """The children's ``NEMESIS_*`` settings (the charge's timeout, settle, reconciler)."""
        self._journal: Journal | None = None
        self._count = 0

    # --- steps ---------------------------------------------------------------------------

    def step(self, text: str) -> None:
        self.outcome.steps.append(f"{time.monotonic() - self.started:6.2f}s {text}")

    def see(self, what: str) -> None:
        self.outcome.seen.add(what)

    def choose(self, name: str, options: list[Any]) -> Any:
        value = self.rng.choice(options)
        self.step(f"{name} = {value!r}")
        return value

    def uniform(self, name: str, low: float, high: float) -> float:
        value = round(self.rng.uniform(low, high), 2)
        self.step(f"{name} = {value}")
        return value

    # --- children ------------------------------------------------------------------------

    async def spawn(
        self,
        label: str,
        words: list[str],
        *,
        env: dict[str, str] | None = None,
        skew: str | None = None,
        crash: str | None = None,
        module: str = "runtime",
    ) -> Child:
        """``python -m runtime --db DB WORDS`` (under ``faketime -f SKEW`` when skewed)."""
        self._count += 1
        name = f"{self._count:02d}-{label}"
        full = child_env(
            NEMESIS_LEDGER=str(self.book.path),
            BIDE_LEASE_TTL=str(self.ttl),
            **self.env,
            **(env or {}),
        )
        full.pop("BIDE_DB", None)
        if crash:
            full["BIDE_CRASH"] = crash
        argv = [sys.executable, "-m", module, "--db", self.db, *words]
        if skew is not None:
            # The wall clock moves; CLOCK_MONOTONIC and CLOCK_BOOTTIME do not, as under NTP.
            full["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            argv = ["faketime", "-f", skew, *argv]
        err, out = self.directory / f"{name}.err", self.directory / f"{name}.out"
        with open(out, "w") as o, open(err, "w") as e:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=ROOT, env=full, stdin=asyncio.subprocess.DEVNULL, stdout=o, stderr=e
            )
        child = Child(name, proc, err, out)
        if skew is not None:
            await child.find_target()
        self.children.append(child)
        what = " ".join(words)
        self.step(
            f"start {name} (pid {proc.pid}): {what}"
            + (f" [faketime {skew}]" if skew else "")
            + (f" [BIDE_CRASH={crash}]" if crash else "")
        )
        return child

    async def cli(self, label: str, words: list[str], **kw: Any) -> int | None:
        """A CLI child run to its end; its exit code (None if it outlived ``CHILD_TIMEOUT``)."""
        child = await self.spawn(label, words, **kw)
        code = await child.wait()
        if code is None:
            child.signal(signal.SIGKILL)
            await child.wait()
            self.outcome.violate(f"{child.label} did not finish in {CHILD_TIMEOUT:g} s")
        self.step(f"{child.label} exited {code}" + (f": {child.last_error()}" if code else ""))
        return code

    def worker_words(self, name: str, *, idle: float | None = None) -> list[str]:
        words = ["worker", "--name", name, "--concurrency", "4", "--poll", str(POLL)]
        words += ["--lease-ttl", str(self.ttl), "--grace", "2"]
        if idle is not None:
            words += ["--exit-when-idle", str(idle)]
        return words

    async def worker(self, name: str, **kw: Any) -> Child:
        return await self.spawn(name, self.worker_words(name), **kw)

    async def stop(self, *children: Child) -> None:
        """SIGCONT, then SIGTERM, each child still alive; SIGKILL one that outlives its grace."""
        for child in children:
            if child.code is None:
                child.signal(signal.SIGCONT)
                child.signal(signal.SIGTERM)
        for child in children:
            if child.code is None and await child.wait(10.0) is None:
                child.signal(signal.SIGKILL)
                await child.wait()
                self.step(f"{child.label} outlived SIGTERM: SIGKILLed")
            self.step(f"{child.label} stopped, exit {child.code}")

    async def kill(self, child: Child) -> None:
        child.signal(signal.SIGKILL)
        await child.wait()
        self.step(f"SIGKILL {child.label}")

    # --- the journal, read from this process ------------------------------------------------

    async def state(self, run_id: str = "r") -> RunState:
        if self._journal is None:
            if not await journals.has_schema(self.db):
                return RunState(run_id)
            self._journal = await Journal(self.db, migrate=False).open()
        for tries in range(3):  # a terminated backend fails one read; the pool reconnects
            try:
                state = await self._journal.state(run_id)
                return state if state is not None else RunState(run_id)
            except Exception:
                if tries == 2:
                    raise
                await asyncio.sleep(0.1)
        raise AssertionError("unreachable")

    async def status(self, run_id: str = "r") -> str:
        return str((await self.state(run_id)).status())

    async def attempt(self, run_id: str = "r", call_id: str = "c1") -> int:
        """The call's current attempt as the journal says now (what an operator sees)."""
        cs = (await self.state(run_id)).calls.get(call_id)
        return cs.attempt if cs is not None else 0

    async def markers(self, run_id: str = "r", call_id: str = "c1") -> int:
        cs = (await self.state(run_id)).calls.get(call_id)
        return len(cs.markers) if cs is not None else 0

    async def until(self, what: str, check: Callable[[], Awaitable[bool]], within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if await check():
                self.step(f"seen: {what}")
                return True
            await asyncio.sleep(0.05)
        self.step(f"not seen in {within:g} s: {what}")
        return False

    async def settled(self, within: float) -> bool:
        """Wait until every run ended, or ``within`` seconds; True if they all ended."""

        async def ended() -> bool:
            return all([await self.status(r) in ENDED for r in self.runs])

        return await self.until("every run ended", ended, within)

    async def close(self) -> None:
        if self._journal is not None:
            await self._journal.close()
            self._journal = None

    # --- PostgreSQL ------------------------------------------------------------------------

    async def terminate_backends(self) -> int:
        """``pg_terminate_backend`` every other connection to the schedule's database."""
        import asyncpg

        from tests.postgres import server

        name = self.db.rpartition("/")[2]
        conn = await asyncpg.connect(
            server.ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://")
        )
        try:
            rows = await conn.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
        finally:
            await conn.close()
        self.step(f"pg_terminate_backend: {len(rows)} connections")
        return len(rows)

    # --- the operator ----------------------------------------------------------------------

    def act(self, actor: str, attempt: int, outcome: str, run_id: str = "r") -> None:
        self.actions.append(Action(actor, run_id, "c1", attempt, outcome))

    async def console(self) -> tuple[Child, str]:
        """``python -m runtime console`` on a free port, naming each operator by a header."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        child = await self.spawn(
            "console",
            ["console", "--port", str(port), "--operator-header", "X-Operator"],
            env={"BIDE_CONSOLE_TOKEN": CONSOLE_TOKEN},
        )
        base = f"127.0.0.1:{port}"
        for _ in range(400):
            with contextlib.suppress(OSError):
                status, _ = await call_console(base, "GET", "/", "nobody")
                if status == 200:
                    return child, base
            if child.code is not None:
                break
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the console did not answer: {child.last_error()}")


async def call_console(
    base: str, method: str, path: str, operator: str, form: dict[str, str] | None = None
) -> tuple[int, str]:
    """One request to the console as ``operator`` (no redirect followed): status and body."""

    def send() -> tuple[int, str]:
        conn = http.client.HTTPConnection(base, timeout=30)
        try:
            headers = {"Authorization": f"Bearer {CONSOLE_TOKEN}", "X-Operator": operator}
            body = None
            if form is not None:
                body = urllib.parse.urlencode(form)
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            conn.request(method, path, body=body, headers=headers)
            got = conn.getresponse()
            return got.status, got.read().decode("utf-8", "replace")
        finally:
            conn.close()

    return await asyncio.to_thread(send)


class _Forms(HTMLParser):
    """Every form of a page: its action and its hidden fields."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append((a.get("action", ""), {}))
        elif tag == "input" and a.get("type") == "hidden" and self.forms:
            self.forms[-1][1][a.get("name", "")] = a.get("value", "")


def forms_of(page: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Forms()
    parser.feed(page)
    return parser.forms


class ConsoleOperator:
    """A person at the console: opens the run, asks to resolve its halted call, confirms."""

    def __init__(self, scene: Scene, base: str, name: str):
        self.scene = scene
        self.base = base
        self.name = name
        self.confirm: dict[str, str] | None = None
        self.saw = 0

    async def open_and_ask(self, outcome: str, run_id: str = "r") -> bool:
        """Open the run page, press "resolve: OUTCOME…": the confirm page is kept, unsent."""
        self.saw = await self.scene.attempt(run_id)
        query = urllib.parse.urlencode({"id": run_id})
        _, page = await call_console(self.base, "GET", f"/run?{query}", self.name)
        wanted = [f for a, f in forms_of(page) if f.get("outcome") == outcome]
        if not wanted:
            self.scene.step(f"{self.name}: the run page offers no {outcome} form")
            return False
        fields = {**wanted[0], "evidence": f"{self.name} looked"}
        status, confirm = await call_console(
            self.base, "POST", f"/confirm?{query}", self.name, fields
        )
        acts = [f for a, f in forms_of(confirm) if a.startswith("act")]
        if status != 200 or not acts:
            self.scene.step(f"{self.name}: confirm page {status}")
            return False
        self.confirm = acts[0]
        self.scene.step(f"{self.name} opened attempt {self.saw} and pressed {outcome}: {acts[0]}")
        return True

    async def confirm_it(self, run_id: str = "r") -> int:
        """Press "confirm" on the kept page; the HTTP status (303 journaled, 409 refused)."""
        assert self.confirm is not None
        query = urllib.parse.urlencode({"id": run_id})
        status, _ = await call_console(self.base, "POST", f"/act?{query}", self.name, self.confirm)
        self.scene.act(f"console {self.name}", self.saw, self.confirm.get("outcome", ""), run_id)
        self.scene.step(f"{self.name} confirmed (saw attempt {self.saw}): HTTP {status}")
        return status


# --- the checks ------------------------------------------------------------------------------


async def check(scene: Scene, needs: frozenset[str]) -> None:
    o = scene.outcome
    for run_id in scene.runs:
        state = await scene.state(run_id)
        status = str(state.status())
        o.statuses[run_id] = status
        executions = scene.book.executions(run_id)
        judged = scene.book.judgments(run_id)
        for cs in state.calls.values():
            fired = [e for e in executions if e.call_id == cs.call.id]
            o.max_fired = max(o.max_fired, len(fired))
            if len(fired) > 1:
                pids = sorted({p for c, p, _ in scene.book.requests(run_id) if c == cs.call.id})
                o.violate(
                    f"{run_id}/{cs.call.id} was charged {len(fired)} times (executions "
                    f"{[e.id for e in fired]}; requests sent by pids {pids})"
                )
            for k, result in sorted(cs.results.items()):
                resolved = result.payload.get("resolved")
                if not isinstance(resolved, dict):
                    continue
                _check_resolution(scene, run_id, cs.call.id, k, result.payload, judged)
            result = cs.result
            if status == "completed" and result is not None:
                value = result.payload.get("value")
                told = isinstance(value, dict) and result.payload.get("outcome") == "value"
                if told and value.get("execution") not in {e.id for e in fired}:
                    o.violate(
                        f"{run_id}/{cs.call.id} completed with {value}; the ledger's "
                        f"executions are {[e.id for e in fired]}"
                    )
        if status in ENDED:
            continue
        if status == "halted" and state.halted_calls():
            continue
        if status == "waiting":
            continue
        o.violate(f"{run_id} is {status} once every process stopped: not ended, no reason")
    missing = sorted(needs - o.seen)
    if missing:
        o.violate(f"the schedule did not make happen what it is about: {missing}")


_SAID = {"value": "found", "not_executed": "absent"}


def _check_resolution(
    scene: Scene,
    run_id: str,
    call_id: str,
    k: int,
    payload: dict[str, Any],
    judged: list[tuple[str, int, str, str, int]],
) -> None:
    """A resolution recorded for attempt k was said of attempt k: by a reconciler that judged
    attempt k so, or an operator who saw attempt k."""
    o = scene.outcome
    where = f"{run_id}/{call_id} attempt {k}"
    outcome = payload.get("outcome")
    if payload.get("attempt") != k:
        o.violate(f"{where}: its resolution names attempt {payload.get('attempt')}")
    by = str(payload["resolved"].get("by") or "")
    if by.startswith("reconciler"):
        said = _SAID.get(str(outcome))
        if not any(
            c == call_id and a == k and s == said and st == "answered" for c, a, s, st, _ in judged
        ):
            seen = sorted({(a, s) for c, a, s, st, _ in judged if c == call_id})
            o.violate(
                f"{where} was resolved {outcome} by {by}, and no reconciler judged attempt {k} "
                f"{said} (judgments (attempt, said): {seen})"
            )
        return
    if not any(
        a.run_id == run_id and a.call_id == call_id and a.attempt == k and a.outcome == outcome
        for a in scene.actions
    ):
        seen = [(a.actor, a.attempt, a.outcome) for a in scene.actions if a.run_id == run_id]
        o.violate(
            f"{where} was resolved {outcome} by {by!r}, and no operator said so of attempt {k} "
            f"(actions (who, attempt seen, outcome): {seen})"
        )


# --- playing a schedule ---------------------------------------------------------------------

Family = Callable[[Scene], Awaitable[frozenset[str]]]
"""Plays its attack on a scene; returns what the schedule must have made happen."""


async def play(schedule: Schedule, base: Path, family: Family) -> Outcome:
    directory = base / schedule.name
    directory.mkdir(parents=True)
    outcome = Outcome(schedule, directory)
    started = time.monotonic()
    try:
        async with journals.located(schedule.backend, directory) as db:
            scene = Scene(schedule, directory, db, outcome)
            try:
                with Provider(scene.book, lambda: scene.delay) as provider:
                    needs = await family(scene)
                if provider.error is not None:
                    raise provider.error
                alive = [c for c in scene.children if c.code is None]
                await scene.stop(*alive)
                with Provider(scene.book, lambda: scene.delay) as provider:
                    if not await asyncio.to_thread(provider.drain, scene.delay + 5):
                        outcome.violate("the provider still holds requests")
                await check(scene, needs)
            finally:
                for child in scene.children:
                    if child.code is None:
                        child.signal(signal.SIGCONT)
                        child.signal(signal.SIGKILL)
                        await child.wait()
                await scene.close()
    except Exception as exc:  # a harness failure is reported as one, never as a pass
        outcome.violate(f"harness error: {type(exc).__name__}: {exc}")
    outcome.seconds = time.monotonic() - started
    return outcome


def replace(schedule: Schedule, **changes: Any) -> Schedule:
    return dataclasses.replace(schedule, **changes)


def env_flag(name: str) -> bool:
    return bool(os.environ.get(name))
