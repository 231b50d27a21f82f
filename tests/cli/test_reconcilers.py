"""Reconcilers with real processes: an effect still in flight in a stalled process is never
concluded absent, and `reconcile` says what each reconciler concluded."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from runtime import Journal
from tests.cli import owned
from tests.cli.invoke import child
from tests.cli.test_ownership import charges, listed, shown, spawn, wait_for


@pytest.mark.slow
def test_a_stalled_attempt_is_not_concluded_absent_before_its_settle_time(tmp_path: Path) -> None:
    """Worker A starts a 3-second charge and stalls (SIGSTOP) before charging; its lease expires
    and worker B takes the run over: the marker has no result, and the reconciler finds no
    charge. Concluding "not executed" now would charge twice once A wakes up; B waits for the
    settle time instead, A wakes and charges (its result is fenced off), and B's next look
    finds that charge: one charge.

    Slow (its 15 s settle time outlasts any stop on a loaded machine): the default run shows the
    same through the crash suite's worker stopped past its lease (``tests/crash``, with more
    checks), and ``show``'s words for a halt still reconciling in ``tests/runtime``."""
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"

    async def submit() -> None:
        async with Journal(db) as journal:
            await owned.reconciled.submit(
                "r", "go", journal=journal, spec="tests.cli.owned:reconciled"
            )

    asyncio.run(submit())
    # The settle time outlasts how long A stays stopped on a loaded machine (the `list` and
    # `show` children that time it take seconds each there): a stop past it may be concluded
    # absent, by the rule, and would charge twice.
    env = {"LEDGER": str(ledger), "SLOW": "3", "SETTLE": "15"}
    worker = ["worker", "--db", str(db), "--poll", "0.1", "--lease-ttl", "1", "-q"]
    a = spawn(*worker, "--name", "w-a", BIDE_HOST="host-a", **env)
    b = None
    try:
        wait_for("A's charge in flight", lambda: bool(listed(db, "r").get("in_flight")))
        a.send_signal(signal.SIGSTOP)
        stalled = time.monotonic()
        b = spawn(*worker, "--name", "w-b", BIDE_HOST="host-b", **env)
        wait_for("B halts on the attempt", lambda: shown(db, "r").get("status") == "halted")
        told = child("show", "--db", str(db), "r").out
        assert "reconciling" in told and "said absent" in told, told
        assert charges(ledger) == []
        time.sleep(max(0.0, 2.5 - (time.monotonic() - stalled)))
        assert shown(db, "r").get("status") == "halted"  # still not concluded
        a.send_signal(signal.SIGCONT)
        wait_for("completed", lambda: shown(db, "r").get("status") == "completed", timeout=60)
    finally:
        for p in (a, b):
            if p is not None and p.returncode is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.communicate()
    assert charges(ledger) == ["r c1"]

    async def resolution() -> dict[str, object]:
        async with Journal(db) as journal:
            state = await journal.require("r")
        result = state.calls["c1"].results[1].payload
        return dict(result["resolved"], outcome=result["outcome"])

    settled = asyncio.run(resolution())
    assert settled["outcome"] == "value" and settled["reconciler"] == "find_charge"
    assert settled["evidence"] == "ledger line r"


def test_reconcile_prints_what_each_reconciler_concluded(tmp_path: Path) -> None:
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"
    spec = "tests.cli.owned:reconciled"
    killed = child(
        "run", "--db", str(db), "--agent", spec, "--run-id", "r", "go",
        LEDGER=str(ledger), BIDE_CRASH="attempt.after_marker",
    )  # fmt: skip
    assert killed.code == -signal.SIGKILL
    unknown = child("reconcile", "--db", str(db), "r", LEDGER=str(ledger), LOOKUP_DOWN="1")
    assert unknown.code == 4, unknown.err
    assert (
        "r c1 reconciled_charge: find_charge said unknown: the ledger is unreachable: still halted"
        in unknown.out
    )
    early = child("reconcile", "--db", str(db), LEDGER=str(ledger), SETTLE="3600")
    assert early.code == 4
    assert "said absent: no ledger line for r c1 (it may still be in flight" in early.out
    done = child("reconcile", "--db", str(db), LEDGER=str(ledger), SETTLE="0")
    assert done.code == 0, done.err
    assert "find_charge said absent: no ledger line for r c1: resolved: not executed" in done.out
    resumed = child("resume", "--db", str(db), "r", LEDGER=str(ledger))
    assert (resumed.code, resumed.out) == (0, "charged\n"), resumed.err
    assert charges(ledger) == ["r c1"]
