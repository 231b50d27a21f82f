"""The attacks, one family per path to a second charge (issue 27), each seeded.

A family plays its attack on a ``Scene`` and returns what the schedule must have made happen for
its pass to mean something (``Scene.see``). Every choice it makes comes from the scene's seeded
random source and is written as a step, so a failure prints the schedule that produced it.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable

from tests.nemesis.agents import run_input
from tests.nemesis.harness import ROOT, Child, ConsoleOperator, Scene, stop_supported

__all__ = ["FAMILIES", "POSTGRES_ONLY", "SQLITE_ONLY"]

CHARGE = "tests.nemesis.agents:charge"
PERSON = "tests.nemesis.agents:person"


def _cli_has_attempt() -> bool:
    """Whether this build's ``resolve`` takes ``--attempt``."""
    helped = subprocess.run(
        [sys.executable, "-m", "runtime", "resolve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return "--attempt" in helped.stdout


# --- shared steps ----------------------------------------------------------------------------


async def marked_unsent(scene: Scene, spec: str) -> None:
    """``run`` killed right after attempt 1's marker committed: the charge never left."""
    words = ["run", "--run-id", "r", "--agent", spec, "--json", run_input("r")]
    code = await scene.cli("run", words, crash="attempt.after_marker")
    if code != -signal.SIGKILL:
        scene.outcome.violate(f"`run` armed at attempt.after_marker exited {code}")
    if await scene.status() == "halted":
        scene.see("halted")


async def submit(scene: Scene, spec: str) -> None:
    for run_id in scene.runs:
        words = ["submit", "--agent", spec, "--run-id", run_id, "--json", run_input(run_id)]
        code = await scene.cli(f"submit-{run_id}", words)
        if code != 0:
            raise RuntimeError(f"submit {run_id} exited {code}")


async def charged_and_killed(scene: Scene, label: str, words: list[str]) -> None:
    """A drive that charges (attempt 2) and dies before the result is recorded: it halts."""
    before = await scene.markers()
    code = await scene.cli(label, words, crash="tool.after_effect")
    if code == -signal.SIGKILL and await scene.markers() > before and scene.book.executions("r"):
        scene.see("next attempt charged")


async def finish(scene: Scene) -> None:
    """A careful ending: the charge looked up by its key (``reconcile``), then ``resume``."""
    for _ in range(3):
        status = await scene.status()
        if status != "halted":
            break
        await scene.cli("reconcile", ["reconcile", "r", "--agent", CHARGE])
        await scene.cli("resume", ["resume", "r", "--json"])


async def wait_stopped(scene: Scene, child: Child, within: float) -> bool:
    async def stopped() -> bool:
        return child.stopped() or child.code is not None

    return await scene.until(f"{child.label} stopped", stopped, within) and child.stopped()


async def charged(scene: Scene, run_id: str = "r") -> bool:
    return bool(scene.book.executions(run_id))


# --- path 1: a resolution bound to the attempt it judged -------------------------------------


async def cli_retyped(scene: Scene) -> frozenset[str]:
    """``resolve --not-executed`` typed again after attempt 2 was sent and halted."""
    scene.ttl = scene.choose("lease_ttl", [1.0, 1.5])
    words = ["resolve", "r", "c1", "--not-executed", "--by", "ops"]
    if _cli_has_attempt() and scene.choose("operator types", ["plain", "--attempt"]) != "plain":
        words += ["--attempt", "1"]
    await marked_unsent(scene, PERSON)
    await scene.cli("resolve", words)
    scene.act("cli ops", 1, "not_executed")
    await charged_and_killed(scene, "resume", ["resume", "r", "--json"])
    if await scene.markers() >= 2 and await scene.status() == "halted":
        scene.see("stale action after the next attempt")
    await scene.cli("resolve-again", words)  # the same command, retyped (a retry, a script)
    scene.act("cli ops", 1, "not_executed")
    await scene.cli("resume", ["resume", "r", "--json"])
    await finish(scene)
    return frozenset({"halted", "next attempt charged", "stale action after the next attempt"})


async def console_stale(scene: Scene) -> frozenset[str]:
    """Two operators open halted attempt 1 in the console; one confirms "not executed", a worker
    runs attempt 2 (which halts), then the other confirms the page they still have."""
    scene.ttl = scene.choose("lease_ttl", [1.0, 1.5])
    await marked_unsent(scene, PERSON)
    console, base = await scene.console()
    alice, bob = ConsoleOperator(scene, base, "alice"), ConsoleOperator(scene, base, "bob")
    if not (await alice.open_and_ask("not_executed") and await bob.open_and_ask("not_executed")):
        scene.outcome.violate("the console offered no 'not executed' form for the halted call")
        return frozenset()
    await alice.confirm_it()
    if scene.choose("alice confirms", ["once", "twice"]) == "twice":
        await alice.confirm_it()  # a double submit: the same resolution again changes nothing
    worker = scene.worker_words("w0", idle=1.0)
    await charged_and_killed(scene, "w0", worker)
    if await scene.markers() >= 2 and await scene.status() == "halted":
        scene.see("stale action after the next attempt")
    await bob.confirm_it()
    code = await scene.cli("w1", scene.worker_words("w1", idle=1.0))
    if code != 0:
        scene.outcome.violate(f"worker w1 exited {code}")
    await finish(scene)
    await scene.stop(console)
    return frozenset({"halted", "next attempt charged", "stale action after the next attempt"})


async def slow_reconciler(scene: Scene) -> frozenset[str]:
    """A reconciler looks attempt 1 up (absent) and answers late: meanwhile another settled
    attempt 1, and attempt 2 was sent and halted."""
    scene.ttl = 1.0
    settle = scene.uniform("settle", 0.2, 0.6)
    scene.env.update(NEMESIS_RECONCILE="1", NEMESIS_SETTLE=str(settle))
    await marked_unsent(scene, CHARGE)
    gate = scene.directory / "gate"
    slow = await scene.spawn("slow-reconcile", ["reconcile", "r"], env={"NEMESIS_GATE": str(gate)})

    async def looked() -> bool:
        return any(p == slow.pid and st == "looked" for *_, st, p in scene.book.judgments("r"))

    await scene.until("the slow reconciler looked attempt 1 up", looked, 30)
    for i in range(40):  # another reconciler settles attempt 1 once its settle time passed
        if await scene.attempt() >= 2:
            break
        await scene.cli(f"reconcile{i}", ["reconcile", "r"])
        await asyncio.sleep(0.2)
    await charged_and_killed(scene, "resume", ["resume", "r", "--json"])
    if await scene.markers() >= 2 and await scene.status() == "halted":
        scene.see("stale action after the next attempt")
    gate.touch()
    scene.step("the slow reconciler may answer now")
    await slow.wait()
    scene.step(f"{slow.label} exited {slow.code}")
    await scene.cli("resume", ["resume", "r", "--json"])
    await finish(scene)
    return frozenset({"halted", "next attempt charged", "stale action after the next attempt"})


# --- path 2: "absent" only after a declared settle time ----------------------------------------


async def late_provider(scene: Scene) -> frozenset[str]:
    """A charge with ``timeout=1`` whose provider commits seconds after the request; two
    workers with the reconciler, and no declared settle time (or one past the provider's)."""
    scene.ttl = scene.choose("lease_ttl", [1.0, 1.5])
    scene.delay = scene.uniform("provider delay", 4.0, 5.0)
    settle = scene.choose("declared settle", [None, None, round(scene.delay + 2, 2)])
    scene.env.update(
        NEMESIS_TIMEOUT="1",
        NEMESIS_RECONCILE="1",
        NEMESIS_SETTLE="" if settle is None else str(settle),
    )
    await submit(scene, CHARGE)
    workers = [await scene.worker(f"w{i}") for i in range(2)]

    async def halted_uncharged() -> bool:
        return await scene.status() == "halted" and not await charged(scene)

    if await scene.until("halted at the timeout, charge not landed", halted_uncharged, 10):
        scene.see("halted before the charge landed")
    await scene.settled(scene.delay + (settle or 0) + 8)
    await scene.stop(*workers)
    return frozenset({"halted before the charge landed"})


# --- paths 3 and 4: one clock per journal -----------------------------------------------------


async def clock_skew(scene: Scene) -> frozenset[str]:
    """The charge times out while the provider still holds it; a reconciler whose wall clock is
    stepped (or a driver whose clock was behind when it marked) must wait out the settle time."""
    scene.ttl = 1.0
    scene.delay = scene.uniform("provider delay", 4.0, 5.0)
    settle = round(scene.delay + scene.uniform("settle past the delay", 1.5, 2.5), 2)
    scene.env.update(NEMESIS_TIMEOUT="1", NEMESIS_RECONCILE="1", NEMESIS_SETTLE=str(settle))
    how = scene.choose(
        "skew", ["worker +120s", "worker +1h", "worker +120s", "driver -1h", "worker -1h"]
    )
    who, _, offset = how.partition(" ")
    offset = {"+1h": "+3600s", "-1h": "-3600s"}.get(offset, offset)
    # The workers are up before the charge halts: they judge it while the provider holds it.
    workers = [await scene.worker("w-skewed", skew=offset if who == "worker" else None)]
    if scene.choose("a worker with a true clock too", [False, True]):
        workers.append(await scene.worker("w-true"))
    words = ["run", "--run-id", "r", "--agent", CHARGE, "--json", run_input("r")]
    driver = await scene.spawn("run", words, skew=offset if who == "driver" else None)

    async def halted() -> bool:
        return driver.code is not None or await scene.status() == "halted"

    await scene.until("the charge halted at its timeout", halted, 30)
    if await scene.status() == "halted" and not await charged(scene):
        scene.see("halted before the charge landed")
    await driver.wait()
    scene.step(f"{driver.label} exited {driver.code}")
    await scene.settled(settle + scene.ttl + 8)
    await scene.stop(*workers)
    return frozenset({"halted before the charge landed"})


async def live_takeover(scene: Scene) -> frozenset[str]:
    """A worker is mid-charge; a second worker, or the owner itself, has its wall clock stepped
    (an hour either way, or +120 s): the live run must stay with its owner."""
    scene.ttl = 1.0
    scene.delay = scene.uniform("provider delay", 3.5, 4.5)
    scene.env.update(NEMESIS_RECONCILE="1", NEMESIS_SETTLE=str(scene.uniform("settle", 0.3, 1)))
    how = scene.choose(
        "step", ["newcomer +120s", "newcomer +3600s", "owner -3600s", "newcomer -3600s"]
    )
    who, _, offset = how.partition(" ")
    await submit(scene, CHARGE)
    owner = await scene.worker("w-owner", skew=offset if who == "owner" else None)

    async def sent() -> bool:
        return bool(scene.book.requests("r"))

    await scene.until("the owner sent the charge", sent, 20)
    newcomer = await scene.worker("w-new", skew=offset if who == "newcomer" else None)
    await asyncio.sleep(scene.ttl + 1.0)  # its start, then a whole lease of the owner's
    if not await charged(scene):
        scene.see("second worker live while the charge was in flight")
    await scene.settled(scene.delay + 8)
    await scene.stop(owner, newcomer)
    return frozenset({"second worker live while the charge was in flight"})


# --- path 5: nothing sent past the lease --------------------------------------------------


async def stopped_driver(scene: Scene) -> frozenset[str]:
    """A worker SIGSTOPped right after its marker commits; another takes the run over, settles
    and charges; the first is SIGCONTed and must send nothing."""
    scene.ttl = 1.0
    scene.env.update(NEMESIS_RECONCILE="1", NEMESIS_SETTLE=str(scene.uniform("settle", 0.3, 1)))
    await submit(scene, CHARGE)
    words = scene.worker_words("w-stopped")
    if stop_supported():
        stopped = await scene.spawn("w-stopped", words, crash="attempt.after_marker@1:stop")
    else:
        env = {"NEMESIS_STOP": "attempt.after_marker@1"}
        stopped = await scene.spawn("w-stopped", words, env=env, module="tests.nemesis.launch")
    if not await wait_stopped(scene, stopped, 30):
        scene.outcome.violate(f"{stopped.label} did not stop after its marker: {stopped.code}")
        return frozenset()
    scene.see("stopped after its marker")
    other = await scene.worker("w-other")

    async def settled_elsewhere() -> bool:
        return await charged(scene) or await scene.status() == "completed"

    if await scene.until("the other worker charged", settled_elsewhere, 20):
        scene.see("taken over and charged while stopped")
    stopped.signal(signal.SIGCONT)
    scene.step(f"SIGCONT {stopped.label}")
    await asyncio.sleep(2 * scene.ttl)
    await scene.settled(8)
    await scene.stop(stopped, other)
    late = [c for c, pid, _ in scene.book.requests("r") if pid == stopped.pid]
    if late and "taken over and charged while stopped" in scene.outcome.seen:
        scene.outcome.violate(f"the stopped worker sent {late} after another owner charged")
    if "database is locked" in other.err.read_text():
        # Stopped inside a SQLite write transaction, it kept every writer out: nobody could take
        # the run over, and on waking it may renew its lease and send (the lease never ended).
        scene.step("the stopped worker held SQLite's write lock: no takeover was possible")
        return frozenset({"stopped after its marker"})
    return frozenset({"stopped after its marker", "taken over and charged while stopped"})


# --- the other faults, at seeded moments --------------------------------------------------


async def _pool(scene: Scene) -> list[Child]:
    scene.runs = ["r0", "r1"]
    scene.ttl = scene.choose("lease_ttl", [1.0, 1.5])
    scene.delay = scene.uniform("provider delay", 0.05, 1.5)
    timeout = scene.choose("charge timeout", [None, 1.0])
    # The charge declares the settle time honestly: past the provider's delay, which is how long
    # a request that left may take to land (a shorter one lets "absent" settle a charge still in
    # flight, and no journal can help that).
    settle = round(scene.delay + scene.uniform("settle past the delay", 0.1, 1.0), 2)
    scene.env.update(
        NEMESIS_RECONCILE="1",
        NEMESIS_SETTLE=str(settle),
        NEMESIS_TIMEOUT="" if timeout is None else str(timeout),
    )
    await submit(scene, CHARGE)
    workers = [await scene.worker(f"w{i}") for i in range(2)]

    async def claimed() -> bool:
        return any([await _holder(scene, workers, r) is not None for r in scene.runs])

    await scene.until("a worker holds a run", claimed, 10)
    return workers


async def _holder(scene: Scene, workers: list[Child], run_id: str) -> Child | None:
    state = await scene.state(run_id)
    del state
    journal = scene._journal
    if journal is None:
        return None
    lease = await journal.lease(run_id)
    if lease is None or not lease.live:
        return None
    return next((w for w in workers if w.pid == lease.owner.pid), None)


async def stall(scene: Scene) -> frozenset[str]:
    """SIGSTOP the worker holding a run past its lease's TTL, then SIGCONT it."""
    workers = await _pool(scene)
    await asyncio.sleep(scene.uniform("stall after", 0.2, 2.0))
    holder = await _holder(scene, workers, "r0") or await _holder(scene, workers, "r1")
    if holder is not None:
        holder.signal(signal.SIGSTOP)
        seconds = scene.uniform("stopped for", scene.ttl * 1.5, scene.ttl * 3)
        scene.step(f"SIGSTOP {holder.label}")
        scene.see("stopped a holder")
        await asyncio.sleep(seconds)
        holder.signal(signal.SIGCONT)
        scene.step(f"SIGCONT {holder.label}")
    await scene.settled(15)
    await scene.stop(*workers)
    return frozenset()


async def kill(scene: Scene) -> frozenset[str]:
    """SIGKILL a worker at a seeded moment; a supervisor restarts it."""
    workers = await _pool(scene)
    await asyncio.sleep(scene.uniform("kill after", 0.2, 2.5))
    victim = workers[scene.choose("victim", [0, 1])]
    await scene.kill(victim)
    workers.append(await scene.worker("w-restarted"))
    await scene.settled(15)
    await scene.stop(*workers)
    return frozenset()


async def pg_terminate(scene: Scene) -> frozenset[str]:
    """``pg_terminate_backend`` of every worker connection, at seeded moments."""
    workers = await _pool(scene)
    for i in range(scene.choose("terminations", [3, 4, 5])):
        await asyncio.sleep(scene.uniform(f"terminate {i} after", 0.3, 1.0))
        if await scene.terminate_backends():
            scene.see("terminated a backend")
    # A worker whose journal failed under it exits; its supervisor restarts it.
    for i, w in enumerate(list(workers)):
        if w.code is not None:
            scene.step(f"{w.label} exited {w.code}: {w.last_error()}")
            workers.append(await scene.worker(f"w{i}-restarted"))
    await scene.settled(15)
    await scene.stop(*workers)
    return frozenset({"terminated a backend"})


Family = Callable[[Scene], Awaitable[frozenset[str]]]

FAMILIES: dict[str, Family] = {
    "cli_retyped": cli_retyped,
    "console_stale": console_stale,
    "slow_reconciler": slow_reconciler,
    "late_provider": late_provider,
    "clock_skew": clock_skew,
    "live_takeover": live_takeover,
    "stopped_driver": stopped_driver,
    "stall": stall,
    "kill": kill,
    "pg_terminate": pg_terminate,
}
POSTGRES_ONLY = frozenset({"pg_terminate"})
SQLITE_ONLY: frozenset[str] = frozenset()
