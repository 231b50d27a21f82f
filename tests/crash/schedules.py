"""Which schedules run: the per-commit set (every crash point under every Safety once, a few random
kills, several runs in one process, two drivers, worker processes killed at crash points and at
random across a pool) and the longer seeded set (``-m slow``).

Every schedule has a seed; ``BIDE_CRASH_SEED=<seed>`` replays it (``tests/crash/test_replay.py``).
A point schedule's seed is derived from its name; a random schedule is made from its seed alone.
"""

from __future__ import annotations

import dataclasses
import os
import random
import zlib
from collections.abc import Iterable

from tests.crash.harness import Schedule
from tests.crash.workers import LEASE_TTL

RO, ID, SE = "read_only", "idempotent", "side_effect"
SAFETIES = (SE, ID, RO)
HALT, RERUN, RETRY = "halt", "rerun", "retry"
CUT = {SE: frozenset({HALT}), ID: frozenset({RETRY}), RO: frozenset({RERUN})}
"""What a cut between a call's effect and its recorded result must lead to, by Safety."""

# Journal records of a clean run of each single-Safety script, in commit order:
#   side_effect: header, start, turn 1, 2 markers, 2 results, turn 2, marker c3 (9),
#                result c3 (10), turn 3, end                                     = 12
#   others:      header, start, turn 1, 2 results, turn 2, result c3 (7), turn 3, end = 9
# A turn shares its commit with the record after it: a marker (side_effect), a result
# (read_only) or the end (the final answer); idempotent turns commit alone, before the upsert.
WRITES = {SE: 12, ID: 9, RO: 9}
MARKER_C3, RESULT_C3 = {SE: 9}, {SE: 10, ID: 7, RO: 7}

RANDOM_BASE_SEED = int(os.environ.get("BIDE_CRASH_RANDOM_SEED", "1000"))
RANDOM_COUNT = int(os.environ.get("BIDE_CRASH_RANDOM", "3"))
"""From the default base seed: native, kills timed from the first driving line and from spawn
(the MCP seeds, each with a clean MCP drive to time, are the slow set's)."""
SLOW_RANDOM_COUNT = int(os.environ.get("BIDE_CRASH_SLOW_RANDOM", "120"))
JITTER_MS = 40.0


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) + (1 << 32)


def point(
    group: str, crash: str, script: str, transport: str = "native", **options: object
) -> Schedule:
    name = f"{crash} {script} {transport}"
    if options.get("resolve_crashes"):
        name = f"{'+'.join(options['resolve_crashes'])} (in resolve) {script} {transport}"  # type: ignore[arg-type]
    return Schedule(
        group=group,
        name=name,
        seed=seed_of(f"{group}/{name}"),
        script=script,
        transport=transport,
        crash=crash,
        **options,  # type: ignore[arg-type]
    )


def native_points() -> list[Schedule]:
    """Every crash point under every Safety it applies to, once, with the effect window first."""
    g = "crash points, native tools"
    out: list[Schedule] = []
    for p in ("tool.after_effect", "tool.after_call"):
        out += [point(g, f"{p}@3", s, expect=CUT[s]) for s in SAFETIES]
    out += [point(g, "attempt.before_marker@3", SE)]
    out += [point(g, "attempt.after_marker@3", SE, expect=CUT[SE])]
    out += [point(g, f"write.before_commit@{RESULT_C3[s]}", s, expect=CUT[s]) for s in SAFETIES]
    out += [point(g, f"write.after_commit@{MARKER_C3.get(s, 5)}", s) for s in SAFETIES]
    for p, hit in (
        ("model.after_answer", 2),
        ("turn.after_record", 2),
        ("result.after_record", 1),
        ("end.before_marker", 1),
        ("writer.after_commit", 6),
    ):
        out += [point(g, f"{p}@{hit}", s) for s in SAFETIES]
    # Turn 2 about to commit with c3's result (read_only: c3 ran, so it runs again), its marker
    # (side_effect: nothing fired) or alone (idempotent); turn 3 about to commit with the end.
    out += [point(g, "turn.before_record@2", s) for s in (SE, ID)]
    out += [point(g, "turn.before_record@2", RO, expect=CUT[RO])]
    out += [point(g, "turn.before_record@3", RO)]
    out.append(
        point(
            g,
            "tool.after_effect@3",
            SE,
            resolve_crashes=("resolve.before_record", "write.after_commit@1"),
            expect=frozenset({HALT}),
        )
    )
    return out


def native_sweep() -> list[Schedule]:
    """The slow set: every hit of every point, and every K-th journal write, per Safety."""
    g = "crash point sweep, native tools"
    out: list[Schedule] = []
    calls = 3
    for s in SAFETIES:
        tool_points = ["tool.after_effect", "tool.after_call", "result.after_record"]
        if s == SE:
            tool_points += ["attempt.before_marker", "attempt.after_marker"]
        for p in tool_points:
            out += [point(g, f"{p}@{k}", s) for k in range(1, calls + 1)]
        for p in ("model.after_answer", "turn.before_record", "turn.after_record"):
            out += [point(g, f"{p}@{k}", s) for k in range(1, 4)]
        out += [point(g, "end.before_marker@1", s)]
        # A clean read_only run commits 7 times (the lease, the header, the start, turn 1 with
        # c1's result, c2's result, turn 2 with c3's, the answer with the end): every hit
        # fires under every Safety up to there.
        out += [point(g, f"writer.after_commit@{k}", s) for k in range(1, 8)]
        for p in ("write.before_commit", "write.after_commit"):
            out += [point(g, f"{p}@{k}", s) for k in range(1, WRITES[s] + 1)]
    return out


def mcp_points() -> list[Schedule]:
    """MCP tools, whose effects happen in the server process: the cut between the server's answer
    and the recorded result, and a marker committed before the request left."""
    g = "crash points, MCP stdio tools"
    out = [point(g, "tool.after_call@3", s, "mcp", expect=CUT[s]) for s in SAFETIES]
    out.append(point(g, "attempt.after_marker@3", SE, "mcp", expect=CUT[SE]))
    return out


def mcp_sweep() -> list[Schedule]:
    g = "crash point sweep, MCP stdio tools"
    out: list[Schedule] = []
    for s in SAFETIES:
        points = ["tool.after_call", "result.after_record", "model.after_answer"]
        points += ["turn.before_record", "turn.after_record"]
        if s == SE:
            points += ["attempt.before_marker", "attempt.after_marker"]
        for p in points:
            out += [point(g, f"{p}@{k}", s, "mcp") for k in range(1, 4)]
    return out


def outlived(*, slow: bool = False) -> list[Schedule]:
    """The agent is killed while the server holds the request; the server performs the effect
    after the agent is dead. The reconciler must wait for it, and find it. A side effect's
    request; the slow set adds an idempotent one's."""
    g = "MCP server outlives its agent"
    out = []
    for s in (SE, ID) if slow else (SE,):
        name = f"agent killed mid-call {s} mcp"
        out.append(
            Schedule(
                group=g,
                name=name,
                seed=seed_of(name),
                script=s,
                transport="mcp",
                slow=(("c3", 1500.0),),
                kill_on_begun="c3",
                expect=frozenset({"outlived"}) | CUT[s],
            )
        )
    return out


def random_kill(seed: int, group: str = "random kills") -> Schedule:
    """A schedule made from its seed alone: transport, how many drives to kill, jitter."""
    rng = random.Random(seed)
    transport = "mcp" if seed % 4 == 3 else "native"  # a quarter over MCP (they cost more)
    kills = 1 if rng.random() < 0.6 else 2
    # A third are timed across the whole child, imports and journal creation included; the rest
    # from its first driving log line, where every kill can land between records.
    from_spawn = seed % 3 == 2
    return Schedule(
        group=group,
        name=f"random {seed} {transport} kills={kills}{' from spawn' if from_spawn else ''}",
        seed=seed,
        script="mixed",
        transport=transport,
        kills=kills,
        from_spawn=from_spawn,
        jitter_ms=JITTER_MS,
    )


def random_kills(count: int, base: int = RANDOM_BASE_SEED) -> list[Schedule]:
    return [random_kill(base + i) for i in range(count)]


HISTORY_SEED = 180001


def history_kill(seed: int) -> Schedule:
    """A random kill (``random_kill``) of drives that keep a history chunk every turn: each
    resume starts from the chunks and the records after them (``runtime.history``)."""
    s = random_kill(seed, group="random kills, a history chunk every turn")
    return dataclasses.replace(s, name=f"{s.name}, history every turn", history=1)


def history_kills(count: int, base: int = HISTORY_SEED) -> list[Schedule]:
    return [history_kill(base + i) for i in range(count)]


def multi_runs(*, slow: bool = False) -> list[Schedule]:
    """Four runs driven by one process, killed together: by a crash point inside one run's tool,
    and inside the writer, after a commit the runs share (group commit)."""
    g = "several runs in one process"
    # Turn 1 makes effects 1-8 of the four runs, turn 2 effects 9-16 (a charge in each run).
    crashes = ["tool.after_effect@11", "writer.after_commit@14"]
    if slow:
        crashes += [f"tool.after_effect@{k}" for k in (1, 5, 9, 13, 16, 20, 23)]
        crashes += [f"writer.after_commit@{k}" for k in (3, 6, 10, 18, 22)]
        crashes += [f"write.before_commit@{k}" for k in (5, 11, 17, 23, 29)]
        crashes += [f"write.after_commit@{k}" for k in (8, 14, 20, 26)]
    out = []
    for crash in crashes:
        name = f"{crash} mixed native x4"
        out.append(
            Schedule(
                group=g,
                name=name,
                seed=seed_of(name),
                script="mixed",
                crash=crash,
                runs=4,
                jitter_ms=10.0,
            )
        )
    return out


def two_drivers(*, slow: bool = False) -> list[Schedule]:
    """Two processes resume one run at the same time: a run cut after its first turn was
    recorded, and a halted charge resolved "not executed", whose new attempt both race for."""
    g = "two drivers at once"
    out = []
    for i in range(6 if slow else 1):
        suffix = f" #{i}" if i else ""
        running = f"turn.after_record@1 mixed native, two drivers{suffix}"
        out.append(
            Schedule(
                group=g,
                name=running,
                seed=seed_of(running),
                script="mixed",
                crash="turn.after_record@1",
                drivers=2,
                jitter_ms=JITTER_MS,
            )
        )
        halted = f"attempt.after_marker@3 side_effect native, two drivers{suffix}"
        out.append(
            Schedule(
                group=g,
                name=halted,
                seed=seed_of(halted),
                script=SE,
                crash="attempt.after_marker@3",
                drivers=2,
                # Long enough that the second driver, started together, still meets the first
                # on a loaded machine (a process start there takes seconds).
                slow=(("c3", 5000.0),),
                expect=frozenset({HALT, "race"}),
            )
        )
    if slow:
        out.append(overlapping_drivers())
    return out


def overlapping_drivers() -> Schedule:
    """Two processes resume one run cut after its first turn, whose next call takes seconds:
    both are inside the run at once however late a loaded machine starts the second, so a
    runtime that lets both drive it shows it (the ownership mutant's sure probe)."""
    name = "turn.after_record@1 mixed native, two drivers, c1 slow"
    return Schedule(
        group="two drivers at once",
        name=name,
        seed=seed_of(name),
        script="mixed",
        crash="turn.after_record@1",
        drivers=2,
        jitter_ms=JITTER_MS,
        slow=(("c1", 5000.0),),
    )


def worker_point(crash: str, script: str, *, hosts: bool = False, **options: object) -> Schedule:
    g = "worker crash points"
    name = f"{crash} {script} native, by workers{' on their own hosts' if hosts else ''}"
    return Schedule(
        group=g,
        name=name,
        seed=seed_of(f"{g}/{name}"),
        script=script,
        crash=crash,
        workers=1,
        hosts=hosts,
        **options,  # type: ignore[arg-type]
    )


def worker_points(*, slow: bool = False) -> list[Schedule]:
    """A submitted run; a worker SIGKILLed at a crash point, then workers until it completes.

    The per-commit set cuts a side effect's call between its effect and its result, the next
    worker on another machine (it waits for the dead one's lease to expire), and an idempotent
    one's, the next worker on this machine (it takes the run over at once: the pid is gone). The
    slow set is every point under every Safety, as ``native_points`` (a worker's K-th write is
    the run's (K+2)-th record: ``submit`` wrote the header and the start), every other
    schedule's next worker on another machine.
    """
    if not slow:
        return [
            worker_point("tool.after_effect@3", SE, hosts=True, expect=CUT[SE]),
            worker_point("tool.after_effect@3", ID, expect=CUT[ID]),
        ]
    crashes: list[tuple[str, str, frozenset[str]]] = []
    for p in ("tool.after_effect", "tool.after_call"):
        crashes += [(f"{p}@3", s, CUT[s]) for s in SAFETIES]
    crashes += [("attempt.before_marker@3", SE, frozenset())]
    crashes += [("attempt.after_marker@3", SE, CUT[SE])]
    crashes += [(f"write.before_commit@{RESULT_C3[s] - 2}", s, CUT[s]) for s in SAFETIES]
    crashes += [(f"write.after_commit@{MARKER_C3.get(s, 5) - 2}", s, frozenset()) for s in SAFETIES]
    for p, hit in (
        ("model.after_answer", 2),
        ("turn.before_record", 2),
        ("turn.after_record", 2),
        ("result.after_record", 1),
        ("end.before_marker", 1),
        # A worker's read_only run commits 5 times: its lease, turn 1 with c1's result, c2's
        # result, turn 2 with c3's, the answer with the end and the release.
        ("writer.after_commit", 5),
    ):
        crashes += [(f"{p}@{hit}", s, frozenset()) for s in SAFETIES]
    return [
        worker_point(crash, script, hosts=i % 2 == 1, expect=expect)
        for i, (crash, script, expect) in enumerate(crashes)
    ]


def worker_pool(seed: int, group: str = "worker pools, random kills") -> Schedule:
    """A pool made from its seed alone: 2 or 3 workers, 4 to 8 runs of the mixed script, 1 to 3
    random kills dealt to the workers (each killed worker is restarted in its place), the
    workers on one machine or each on its own."""
    rng = random.Random(seed)
    workers = rng.choice((2, 3))
    runs = rng.randint(4, 8)
    kills = rng.randint(1, 3)
    hosts = seed % 2 == 1
    from_spawn = seed % 3 == 2
    return Schedule(
        group=group,
        name=(
            f"pool {seed}: {workers} workers{' on their own hosts' if hosts else ''}, "
            f"{runs} runs, kills={kills}{' from spawn' if from_spawn else ''}"
        ),
        seed=seed,
        script="mixed",
        kills=kills,
        from_spawn=from_spawn,
        jitter_ms=JITTER_MS,
        runs=runs,
        workers=workers,
        hosts=hosts,
    )


def contended_pool() -> Schedule:
    """Three workers started together on six submitted runs, nothing killed: every run is
    claimable by all three at once, and only the lease decides who drives it."""
    g = "worker pools, random kills"
    name = "pool: 3 workers started together on 6 runs, no kill"
    return Schedule(
        group=g,
        name=name,
        seed=seed_of(f"{g}/{name}"),
        script="mixed",
        jitter_ms=JITTER_MS,
        runs=6,
        workers=3,
    )


WORKER_POOL_SEED = int(os.environ.get("BIDE_CRASH_POOL_SEED", "50003"))
"""Pool seeds, apart from the random kills' (the slow set adds 10,000): see ``by_seed``."""
POOL_COUNT = int(os.environ.get("BIDE_CRASH_POOLS", "1"))
SLOW_POOL_COUNT = int(os.environ.get("BIDE_CRASH_SLOW_POOLS", "12"))


def worker_pools(count: int, base: int = WORKER_POOL_SEED) -> list[Schedule]:
    return [worker_pool(base + i) for i in range(count)]


SETTLE = 1.0
"""The crash charge's settle time when it declares a reconciler: an *absent* settles a halt
only once the attempt's owner is gone and this long has passed since its marker."""


def reconciled(schedule: Schedule, group: str) -> Schedule:
    """The same schedule with a declared reconciler and no person (``Schedule.settle``)."""
    name = f"{schedule.name}, reconciler, no person"
    return dataclasses.replace(
        schedule, group=group, name=name, seed=seed_of(f"{group}/{name}"), settle=SETTLE
    )


def reconciled_points(*, slow: bool = False) -> list[Schedule]:
    """A worker killed at the points around a charge, every halt settled by ``find_charge``:
    found (the effect landed, its result did not), absent past the settle time (the marker was
    committed, the charge never left), and no halt at all (killed before the marker)."""
    g = "worker crash points, reconciler, no person"
    points = [
        worker_point("tool.after_effect@3", SE, hosts=True, expect=frozenset({HALT, "settled"})),
        worker_point("attempt.after_marker@3", SE, expect=frozenset({HALT, "settled"})),
    ]
    if slow:
        points += [
            worker_point("tool.after_effect@3", SE, expect=frozenset({HALT, "settled"})),
            worker_point("attempt.after_marker@3", SE, hosts=True, expect=frozenset({"settled"})),
            worker_point("tool.after_call@3", SE, expect=frozenset({"settled"})),
            worker_point("tool.after_call@2", SE, hosts=True, expect=frozenset({"settled"})),
            worker_point("attempt.before_marker@3", SE),
            worker_point(f"write.before_commit@{RESULT_C3[SE] - 2}", SE),
            worker_point(f"write.after_commit@{MARKER_C3[SE] - 2}", SE),
            worker_point("result.after_record@3", SE),
            worker_point("tool.after_effect@2", "mixed", hosts=True),
            worker_point("attempt.after_marker@2", SE, hosts=True),
        ]
    return [reconciled(p, g) for p in points]


def effect_window(seed: int, group: str = "worker killed around a charge, reconciler") -> Schedule:
    """Two workers, one run of the mixed script whose charges pause 250 ms before their effect;
    the worker that holds the run is SIGKILLed at a seeded moment up to 600 ms after a charge's
    request reached it (before the effect, about it, or after it), restarted, and every halt
    is settled by ``find_charge``: no person. Some seeds add a random kill of either worker."""
    rng = random.Random(seed)
    call = rng.choice(("c3", "c5"))
    hosts = seed % 2 == 1
    kills = 1 if rng.random() < 0.3 else 0
    return Schedule(
        group=group,
        name=f"window {seed}: {call} killed within 600 ms of its request"
        + (" on their own hosts" if hosts else "")
        + (f", kills={kills}" if kills else ""),
        seed=seed,
        script="mixed",
        slow=(("c3", 250.0), ("c5", 250.0)),
        jitter_ms=JITTER_MS,
        kill_around=(call, 600.0),
        kills=kills,
        workers=2,
        hosts=hosts,
        settle=SETTLE,
    )


WINDOW_SEED = int(os.environ.get("BIDE_CRASH_WINDOW_SEED", "120009"))
"""The per-commit window's seed: its kill lands 85 ms after c3's request reached the tool,
before the effect, and the next worker is on another host (the "absent" path, after the lease
expired); the slow set's seeds start 10,000 later."""
WINDOW_COUNT = int(os.environ.get("BIDE_CRASH_WINDOWS", "1"))
SLOW_WINDOW_COUNT = int(os.environ.get("BIDE_CRASH_SLOW_WINDOWS", "16"))
RECONCILED_POOL_SEED = 150001
SLOW_RECONCILED_POOLS = int(os.environ.get("BIDE_CRASH_SLOW_RECONCILED_POOLS", "6"))


def effect_windows(count: int, base: int = WINDOW_SEED) -> list[Schedule]:
    return [effect_window(base + i) for i in range(count)]


def reconciled_pools(count: int, base: int = RECONCILED_POOL_SEED) -> list[Schedule]:
    """Pools of workers killed at random across a clean drive, every halt settled by
    ``find_charge``."""
    g = "worker pools, random kills, reconciler"
    return [
        dataclasses.replace(
            worker_pool(seed, g), name=f"{worker_pool(seed).name}, reconciler", settle=SETTLE
        )
        for seed in range(base, base + count)
    ]


STALL_SECONDS = LEASE_TTL + 1.5
"""A stopped worker stays stopped past its lease's TTL, so another one takes its run over."""


def stalls(*, slow: bool = False) -> list[Schedule]:
    """Two workers on their own hosts; the one that holds the run is SIGSTOPped past its lease's
    TTL (the other takes the run over), then SIGCONTed. The charge's settle time outlasts the
    stop, as a settle time must outlast any attempt still in flight."""
    g = "worker stopped past its lease"
    wheres = ["begun:c3"]
    if slow:
        wheres += ["begun:c5", "at:0.2", "at:0.45", "at:0.7", "at:0.9"]
    out = []
    for where in wheres:
        name = f"worker stopped ({where}) for {STALL_SECONDS:g} s, mixed native"
        out.append(
            Schedule(
                group=g,
                name=name,
                seed=seed_of(f"{g}/{name}"),
                script="mixed",
                jitter_ms=JITTER_MS,
                slow=(("c3", 150.0), ("c5", 150.0)),
                workers=2,
                hosts=True,
                stall=where,
                stall_seconds=STALL_SECONDS,
                settle=STALL_SECONDS + 1.5,
                # Stopped mid-charge, the charge lands after the takeover, and the live
                # worker's reconciler finds it once due: no worker needs restarting.
                expect=frozenset({"stalled", "in_round", HALT, "settled"})
                if where.startswith("begun")
                else frozenset(),
            )
        )
    return out


# Records of a clean run of the ``typed`` script, in commit order: header, start, turn 1, marker
# c2, results c1 and c2, turn 2 (an invalid answer) with its error result (8), turn 3 (the valid
# answer) with its result (10), end (11).
TYPED_RETRY, TYPED_END = 8, 11


def typed_points() -> list[Schedule]:
    """A typed-output run killed around its answers: before the invalid answer is recorded,
    mid-retry, before the valid one is, between its settled call and the end, and right after
    the end record committed (a resume must answer the same value with no model request)."""
    g = "typed output"
    return [
        point(g, crash, "typed")
        for crash in (
            "model.after_answer@2",
            "turn.after_record@2",
            f"write.after_commit@{TYPED_RETRY}",
            "model.after_answer@3",
            "end.before_marker@1",
            f"write.after_commit@{TYPED_END}",
        )
    ]


def session_points() -> list[Schedule]:
    """The second message of a two-message session (the first ran cleanly), killed before and
    after its turns are recorded, after a charge's marker (it halts: a person resolves it) and
    before its end: each resume must show the model the first message exactly as before."""
    g = "two-message session"
    out = [
        point(g, crash, "mixed", session=True)
        for crash in ("model.after_answer@1", "turn.after_record@2", "end.before_marker@1")
    ]
    out.append(point(g, "attempt.after_marker@3", SE, session=True, expect=CUT[SE]))
    return out


TREE_HITS = {
    "model.after_answer": 4,
    "turn.before_record": 4,
    "turn.after_record": 4,
    "attempt.before_marker": 2,
    "attempt.after_marker": 2,
    "tool.after_effect": 1,
    "tool.after_call": 2,
    "result.after_record": 2,
    "end.before_marker": 2,
    "writer.after_commit": 13,
    "write.before_commit": 15,
    "write.after_commit": 15,
}
"""How many times one clean drive of the ``tree`` script (a parent whose call drives a child
run that charges) passes each crash point, counted over the process (the parent's passes and
its child's interleave): ``test_the_tree_hits_are_what_a_clean_tree_passes`` counts them."""

TREE_DEFAULT = (
    "attempt.after_marker@1",  # the parent's call is marked; no handle, no child run yet
    "tool.after_effect@1",  # the child's charge reached the provider; nothing of it journaled
    "end.before_marker@1",  # the child's answer is in hand; its end is not recorded
    "tool.after_call@2",  # the child ended; the parent's call has no result yet
)
"""The per-commit tree schedules; the slow set is every hit of every point (``TREE_HITS``)."""


def tree_points(*, slow: bool = False) -> list[Schedule]:
    """A parent whose tool is a child agent that charges, SIGKILLed at a crash point (the K-th
    pass over the whole tree), then resumed until it completes, every halt (the child's charge,
    or the parent's call marked before the child existed) settled by the ledger as a person
    would. ``-m slow``: every hit of every point a clean tree passes."""
    g = "parent with a child run"
    if not slow:
        return [point(g, crash, "tree", expect=_tree_expect(crash)) for crash in TREE_DEFAULT]
    return [
        point(g, f"{p}@{k}", "tree", expect=_tree_expect(f"{p}@{k}"))
        for p, hits in TREE_HITS.items()
        for k in range(1, hits + 1)
    ]


def _tree_expect(crash: str) -> frozenset[str]:
    """Cut between a marker and its call's result, a side effect halts: the parent's call
    before its handle is journaled, the child's charge after its marker."""
    halts = {"attempt.after_marker@1", "attempt.after_marker@2", "tool.after_effect@1"}
    halts.add("tool.after_call@1")  # the charge returned; its result is not recorded
    return frozenset({HALT}) if crash in halts else frozenset()


WAITS_DEFAULT = ("write.after_commit@4", "attempt.after_marker@1", "turn.after_record@3")
WAITS_HITS = {
    "write.before_commit": 10,
    "write.after_commit": 10,
    "writer.after_commit": 11,
    "model.after_answer": 3,
    "turn.before_record": 3,
    "turn.after_record": 3,
    "tool.after_effect": 2,
    "tool.after_call": 2,
    "result.after_record": 2,
    "attempt.before_marker": 1,
    "attempt.after_marker": 1,
}
"""Hits of each point a first drive of ``agents.waits`` passes before it waits for its signal
(counted by ``test_the_waits_hits_are_what_a_first_drive_passes``)."""
WAIT_KILL_SEED = 230001


def waits_points(*, slow: bool = False) -> list[Schedule]:
    """A run whose tools wait between charges (a sleep, a receive of a signal, a receive that
    times out), SIGKILLed at a crash point of its first drive, then resumed, signalled and let
    wait until it completes; ``-m slow``: every commit of that drive, before and after it."""
    g = "tools that wait"
    if not slow:
        crashes = list(WAITS_DEFAULT)
    else:
        crashes = [f"{p}@{k}" for p, hits in WAITS_HITS.items() for k in range(1, hits + 1)]
    out = [point(g, c, "waits", expect=_waits_expect(c)) for c in crashes]
    kills = 6 if slow else 1
    out += [
        Schedule(
            group=g,
            name=f"random {seed} waits kills=2",
            seed=seed,
            script="waits",
            kills=2,
            jitter_ms=JITTER_MS,
        )
        for seed in range(WAIT_KILL_SEED, WAIT_KILL_SEED + kills)
    ]
    return out


def _waits_expect(crash: str) -> frozenset[str]:
    """Cut between the first charge's marker and its result, the run halts."""
    halts = ("attempt.after_marker@1", "tool.after_effect@2", "tool.after_call@2")
    return frozenset({HALT}) if crash in halts else frozenset()


def on_postgres(schedule: Schedule) -> Schedule:
    """The same schedule with its journal in a fresh PostgreSQL database."""
    group = f"{schedule.group} (PostgreSQL)"
    name = f"{schedule.name} on PostgreSQL"
    return dataclasses.replace(
        schedule, group=group, name=name, seed=seed_of(f"{group}/{name}"), backend="postgres"
    )


def per_commit() -> list[Schedule]:
    """The per-commit set, as the default suite runs it on SQLite."""
    return [
        *native_points(),
        *outlived(),
        *random_kills(RANDOM_COUNT),
        *multi_runs(),
        *two_drivers(),
        *worker_points(),
        contended_pool(),
        *worker_pools(POOL_COUNT),
    ]


def postgres_subset() -> list[Schedule]:
    """A few seconds of the per-commit set on PostgreSQL: the cut after a charge's effect,
    halted on resume (the slow set runs the whole per-commit set there; workers taking a dead
    one's runs over on the database's clock are ``tests/postgres/test_workers.py``)."""
    wanted = {"tool.after_effect@3 side_effect native"}
    return [on_postgres(s) for s in per_commit() if s.name in wanted]


def meeting() -> list[Schedule]:
    """Schedules where two drivers meet one run: workers claiming at once, two resumes."""
    return [contended_pool(), *two_drivers()]


def mutant_probes(mutant: str | None = None) -> list[Schedule]:
    """The schedules a mutant is run against, in order, until one fails. A mutant of run
    ownership can only show where two drivers meet a run: its probes start there."""
    if mutant in OWNERSHIP_MUTANTS:
        # The quick meetings catch it on a quiet machine; on a loaded one the second driver may
        # start after the first finished, and only the overlapping drivers are sure to meet.
        return [*meeting(), overlapping_drivers(), *native_points()]
    return native_points() + meeting()


OWNERSHIP_MUTANTS = frozenset({"skip_lease_check"})


def every_named() -> Iterable[Schedule]:
    yield from native_points()
    yield from native_sweep()
    yield from mcp_points()
    yield from mcp_sweep()
    yield from outlived(slow=True)
    yield from multi_runs(slow=True)
    yield from two_drivers(slow=True)
    yield from worker_points(slow=True)
    yield from worker_points()
    yield contended_pool()
    yield from reconciled_points(slow=True)
    yield from stalls(slow=True)
    yield from typed_points()
    yield from session_points()
    yield from tree_points(slow=True)
    for schedule in (*typed_points(), *session_points(), *tree_points(slow=True)):
        yield on_postgres(schedule)
    for schedule in per_commit():
        yield on_postgres(schedule)


def by_seed(seed: int) -> Schedule:
    """The schedule a seed names: a named one, else the random schedule made from it."""
    for schedule in every_named():
        if schedule.seed == seed:
            return schedule
    if WORKER_POOL_SEED <= seed < WORKER_POOL_SEED + 20_000:
        return worker_pool(seed)
    if WINDOW_SEED <= seed < WINDOW_SEED + 20_000:
        return effect_window(seed)
    if RECONCILED_POOL_SEED <= seed < RECONCILED_POOL_SEED + 20_000:
        (pool,) = reconciled_pools(1, seed)
        return pool
    if HISTORY_SEED <= seed < HISTORY_SEED + 20_000:
        return history_kill(seed)
    return random_kill(seed)
