"""At most once, proven by killing real processes: every crash point under every Safety, MCP
servers that outlive their agent, random kills, several runs in one process, two drivers at once,
worker processes killed at crash points and at random across a pool, a parent whose tool is a
child run killed at every crash point it passes.

Each test runs a group of schedules (``tests/crash/schedules.py``) through the harness and fails
with every violated promise, each with the command that replays its schedule.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime import faults
from tests.conftest import child_env
from tests.crash import agents, report, schedules
from tests.crash.harness import Harness, Outcome, Schedule
from tests.postgres import server


def test_the_per_commit_set_arms_every_crash_point_under_every_safety_it_applies_to() -> None:
    """A crash point added to the runtime without a schedule fails here, not silently."""
    armed = set()
    for s in schedules.native_points():
        for crash in (s.crash, *s.resolve_crashes):
            if crash is not None:
                armed.add((crash.partition("@")[0], s.script))
    side_effect_only = {"attempt.before_marker", "attempt.after_marker", "resolve.before_record"}
    wanted = {
        (p, safety)
        for p in faults.POINTS
        for safety in schedules.SAFETIES
        if p not in side_effect_only or safety == schedules.SE
    }
    assert wanted <= armed, sorted(wanted - armed)


def test_the_slow_worker_set_arms_every_crash_point_a_worker_passes_under_every_safety() -> None:
    armed = {(s.crash.partition("@")[0], s.script) for s in schedules.worker_points(slow=True)}
    side_effect_only = {"attempt.before_marker", "attempt.after_marker"}
    wanted = {
        (p, safety)
        for p in faults.POINTS
        if p != "resolve.before_record"  # a worker resolves nothing
        for safety in schedules.SAFETIES
        if p not in side_effect_only or safety == schedules.SE
    }
    assert wanted <= armed, sorted(wanted - armed)


async def run_group(harness: Harness, group: str, items: list[Schedule]) -> list[Outcome]:
    started = time.monotonic()
    outcomes = await harness.run_all(items)
    outcomes += harness.clean  # the clean runs measured for random kills are checked too
    report.add(group, outcomes, time.monotonic() - started)
    failing = [o for o in outcomes if o.violations]
    assert not failing, "\n".join(o.describe() for o in failing)
    return outcomes


async def test_every_crash_point_under_every_safety_keeps_side_effects_at_most_once(
    harness: Harness,
) -> None:
    outcomes = await run_group(harness, "crash points, native tools", schedules.native_points())
    assert sum(o.halts for o in outcomes) > 0, "the schedules never reached the halt path"
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_mcp_tools_keep_the_guarantee_when_their_agent_dies(harness: Harness) -> None:
    items = [*schedules.mcp_points(), *schedules.outlived(slow=True)[1:]]
    outcomes = await run_group(harness, "crash points, MCP stdio tools", items)
    assert sum(o.halts for o in outcomes) > 0


async def test_a_server_that_outlives_its_agent_is_waited_for_and_its_effect_found(
    harness: Harness,
) -> None:
    outcomes = await run_group(harness, "MCP server outlives its agent", schedules.outlived())
    assert all(o.outlived for o in outcomes)


async def test_random_kills_across_a_clean_runs_duration(harness: Harness) -> None:
    items = schedules.random_kills(schedules.RANDOM_COUNT)
    outcomes = await run_group(harness, "random kills", items)
    assert sum(o.kills for o in outcomes) > 0, "no random kill landed"


async def test_random_kills_of_drives_that_resume_from_history_chunks(harness: Harness) -> None:
    items = schedules.history_kills(3)
    outcomes = await run_group(harness, "random kills, a history chunk every turn", items)
    assert sum(o.kills for o in outcomes) > 0, "no random kill landed"


async def test_several_runs_in_one_process_killed_at_once(harness: Harness) -> None:
    await run_group(harness, "several runs in one process", schedules.multi_runs())


async def test_two_drivers_of_one_run_never_both_fire_an_effect(harness: Harness) -> None:
    await run_group(harness, "two drivers at once", schedules.two_drivers())


@pytest.mark.slow
async def test_slow_every_hit_of_every_point(harness: Harness) -> None:
    await run_group(
        harness,
        "sweep: every hit, every K-th write (native)",
        schedules.native_sweep(),
    )


@pytest.mark.slow
async def test_slow_mcp_sweep(harness: Harness) -> None:
    await run_group(harness, "sweep: MCP stdio tools", schedules.mcp_sweep())


@pytest.mark.slow
async def test_slow_random_kills_of_drives_that_resume_from_history_chunks(
    harness: Harness,
) -> None:
    items = schedules.history_kills(30, schedules.HISTORY_SEED + 10_000)
    outcomes = await run_group(harness, "random kills, history chunks (long seeded set)", items)
    assert sum(o.kills for o in outcomes) > 0


@pytest.mark.slow
async def test_slow_random_kills(harness: Harness) -> None:
    items = schedules.random_kills(schedules.SLOW_RANDOM_COUNT, schedules.RANDOM_BASE_SEED + 10_000)
    outcomes = await run_group(harness, "random kills (long seeded set)", items)
    assert sum(o.halts for o in outcomes) > 0


@pytest.mark.slow
async def test_slow_several_runs_in_one_process(harness: Harness) -> None:
    await run_group(
        harness, "several runs in one process (more points)", schedules.multi_runs(slow=True)
    )


@pytest.mark.slow
async def test_slow_two_drivers(harness: Harness) -> None:
    await run_group(harness, "two drivers at once (more seeds)", schedules.two_drivers(slow=True))


async def test_workers_killed_at_crash_points_leave_every_run_completed_once(
    harness: Harness,
) -> None:
    outcomes = await run_group(harness, "worker crash points", schedules.worker_points())
    assert sum(o.halts for o in outcomes) > 0, "no worker schedule reached the halt path"
    assert max(o.max_fired for o in outcomes) == 1


async def test_a_pool_of_workers_killed_at_random_drives_every_run_once(harness: Harness) -> None:
    items = [schedules.contended_pool(), *schedules.worker_pools(schedules.POOL_COUNT)]
    outcomes = await run_group(harness, "worker pools, random kills", items)
    assert sum(o.kills for o in outcomes) > 0, "no worker was killed"


@pytest.mark.slow
async def test_slow_workers_killed_at_every_crash_point(harness: Harness) -> None:
    items = schedules.worker_points(slow=True)
    outcomes = await run_group(harness, "worker crash points (every point)", items)
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_worker_pools(harness: Harness) -> None:
    items = schedules.worker_pools(schedules.SLOW_POOL_COUNT, schedules.WORKER_POOL_SEED + 10_000)
    outcomes = await run_group(harness, "worker pools (long seeded set)", items)
    assert sum(o.kills for o in outcomes) > 0


def _settled(outcomes: list[Outcome]) -> int:
    return sum(o.settled_found + o.settled_absent for o in outcomes)


async def test_workers_with_a_declared_reconciler_settle_every_halt_with_no_person(
    harness: Harness,
) -> None:
    """The charge declares ``find_charge`` (the ledger by idempotency key) and a settle time.
    A worker is killed at a seeded moment about a charge's effect (before it: absent); one is
    SIGSTOPped mid-charge past its lease (the other takes the run over, and finds the charge
    that lands once the stopped one is SIGCONTed). No one resolves anything: every run
    completes, each charge once, and the stopped worker, fenced off, writes nothing more and
    starts no charge. (Workers killed at each point about a charge run with ``-m slow``.)"""
    items = [*schedules.effect_windows(schedules.WINDOW_COUNT), *schedules.stalls()]
    outcomes = await run_group(harness, "workers, reconciler, no person", items)
    assert max(o.max_fired for o in outcomes) == 1
    assert sum(o.misses for o in outcomes) == 0
    assert sum(o.settled_found for o in outcomes) > 0, "no reconciler found a charge"
    assert sum(o.settled_absent for o in outcomes) > 0, "no reconciler settled an absent charge"
    assert sum(o.taken_over for o in outcomes) > 0, "no stopped worker's run was taken over"


async def test_the_per_commit_set_on_postgresql_a_subset(harness: Harness) -> None:
    _postgres()
    outcomes = await run_group(
        harness, "per-commit subset on PostgreSQL", schedules.postgres_subset()
    )
    assert sum(o.halts for o in outcomes) > 0
    assert max(o.max_fired for o in outcomes) == 1


async def test_a_typed_output_run_killed_around_its_answers_answers_the_same(
    harness: Harness,
) -> None:
    await run_group(harness, "typed output", schedules.typed_points())


@pytest.mark.slow  # the default suite's budget: the same points run on SQLite by default
async def test_a_typed_output_run_killed_around_its_answers_on_postgresql(
    harness: Harness,
) -> None:
    _postgres()
    items = [schedules.on_postgres(s) for s in schedules.typed_points()]
    await run_group(harness, "typed output (PostgreSQL)", items)


async def test_a_two_message_session_killed_in_its_second_message_shows_the_same_history(
    harness: Harness,
) -> None:
    outcomes = await run_group(harness, "two-message session", schedules.session_points())
    assert sum(o.halts for o in outcomes) > 0


@pytest.mark.slow  # the default suite's budget: the same points run on SQLite by default
async def test_a_two_message_session_on_postgresql(harness: Harness) -> None:
    _postgres()
    items = [schedules.on_postgres(s) for s in schedules.session_points()]
    await run_group(harness, "two-message session (PostgreSQL)", items)


def _hits(tmp_path: Path, script: str) -> dict[str, int]:
    """The hits of every crash point in one drive of ``script`` through the CLI, every point
    armed past its last hit."""
    code = (
        "import sys; from runtime import faults; from runtime.cli import main\n"
        "main(sys.argv[1:], prog='runtime')\n"
        "print(repr(dict(faults._hits)), file=sys.stderr)\n"
    )
    armed = ",".join(f"{p}@999999" for p in faults.POINTS)
    words = ["--db", str(tmp_path / "j.db"), "run", "--run-id", "r"]
    words += ["--agent", f"tests.crash.agents:{script}", "--json", agents.run_input("r")]
    done = subprocess.run(
        [sys.executable, "-c", code, *words],
        cwd=agents.ROOT,
        env=child_env(BIDE_CRASH=armed, CRASH_LEDGER=str(tmp_path / "ledger.db")),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr[-2000:]
    return dict(ast.literal_eval(done.stderr.strip().splitlines()[-1]))


def test_the_waits_hits_are_what_a_first_drive_passes(tmp_path: Path) -> None:
    """The slow waits set arms every hit of every point the first drive passes (it stops
    waiting for the harness's signal): counted here."""
    assert _hits(tmp_path, "waits") == schedules.WAITS_HITS


async def test_a_run_whose_tools_wait_killed_at_crash_points_charges_at_most_once(
    harness: Harness,
) -> None:
    """Killed around a sleep, a receive and between charges; resumed, signalled, let wait: every
    charge at most once, the signal given once, the timeout journaled once."""
    outcomes = await run_group(harness, "tools that wait", schedules.waits_points())
    assert sum(o.halts for o in outcomes) > 0
    assert sum(o.signalled for o in outcomes) >= len(outcomes)
    assert sum(o.timers for o in outcomes) >= len(outcomes)
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_a_run_whose_tools_wait_killed_at_every_hit_of_every_point(
    harness: Harness,
) -> None:
    items = schedules.waits_points(slow=True)
    outcomes = await run_group(harness, "tools that wait (every hit)", items)
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_a_run_whose_tools_wait_on_postgresql(harness: Harness) -> None:
    _postgres()
    items = [schedules.on_postgres(s) for s in schedules.waits_points(slow=True)]
    outcomes = await run_group(harness, "tools that wait (PostgreSQL, every hit)", items)
    assert max(o.max_fired for o in outcomes) == 1


def test_the_tree_hits_are_what_a_clean_tree_passes(tmp_path: Path) -> None:
    """The slow tree set arms every hit of every point: counted here from a clean drive of the
    tree through the CLI, every point armed past its last hit (a crash point the tree passes
    anew, or once more, fails here rather than going unscheduled)."""
    hits = _hits(tmp_path, "tree")
    assert hits == schedules.TREE_HITS


async def test_a_parent_with_a_child_run_killed_at_crash_points_charges_at_most_once(
    harness: Harness,
) -> None:
    outcomes = await run_group(harness, "parent with a child run", schedules.tree_points())
    assert sum(o.halts for o in outcomes) > 0, "no tree schedule reached the halt path"
    assert max(o.max_fired for o in outcomes) == 1


async def test_a_parent_with_a_child_run_on_postgresql(harness: Harness) -> None:
    _postgres()
    wanted = {"tool.after_effect@1", "tool.after_call@2"}
    items = [
        schedules.on_postgres(s)
        for s in schedules.tree_points()
        if s.crash is not None and s.crash in wanted
    ]
    outcomes = await run_group(harness, "parent with a child run (PostgreSQL)", items)
    assert sum(o.halts for o in outcomes) > 0


@pytest.mark.slow
async def test_slow_a_parent_with_a_child_run_killed_at_every_hit_of_every_point(
    harness: Harness,
) -> None:
    items = schedules.tree_points(slow=True)
    outcomes = await run_group(harness, "parent with a child run (every hit)", items)
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_a_parent_with_a_child_run_on_postgresql_every_hit(harness: Harness) -> None:
    _postgres()
    items = [schedules.on_postgres(s) for s in schedules.tree_points(slow=True)]
    outcomes = await run_group(harness, "parent with a child run (PostgreSQL, every hit)", items)
    assert max(o.max_fired for o in outcomes) == 1


def _postgres() -> None:
    why = server.reachable()
    if why is not None:
        if os.environ.get("BIDE_TEST_REQUIRE_POSTGRES"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.mark.slow
async def test_slow_workers_with_a_declared_reconciler(harness: Harness) -> None:
    items = [
        *schedules.reconciled_points(slow=True),
        *schedules.effect_windows(schedules.SLOW_WINDOW_COUNT, schedules.WINDOW_SEED + 10_000),
        *schedules.reconciled_pools(schedules.SLOW_RECONCILED_POOLS),
    ]
    outcomes = await run_group(harness, "workers, reconciler, no person (long set)", items)
    assert max(o.max_fired for o in outcomes) == 1
    assert sum(o.misses for o in outcomes) == 0
    assert sum(o.settled_found for o in outcomes) > 0
    assert sum(o.settled_absent for o in outcomes) > 0


@pytest.mark.slow
async def test_slow_workers_stopped_past_their_lease(harness: Harness) -> None:
    outcomes = await run_group(
        harness, "worker stopped past its lease (more moments)", schedules.stalls(slow=True)[1:]
    )
    assert sum(o.stalled for o in outcomes) > 0
    assert max(o.max_fired for o in outcomes) == 1


@pytest.mark.slow
async def test_slow_the_per_commit_set_on_postgresql(harness: Harness) -> None:
    _postgres()
    items = [schedules.on_postgres(s) for s in schedules.per_commit()]
    outcomes = await run_group(harness, "the per-commit set on PostgreSQL", items)
    assert sum(o.halts for o in outcomes) > 0
    assert max(o.max_fired for o in outcomes) == 1
