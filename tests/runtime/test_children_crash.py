"""A parent with a child run, SIGKILLed at each crash point of its schedule, then resumed (and
any halt resolved by what the ledger says happened): one child run, at most one charge, and the
parent completes. The process is really killed (``BIDE_CRASH``), on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime import Journal, Resolution
from tests.conftest import ROOT, child_env
from tests.runtime import children_agents as A

POINTS = [
    "attempt.after_marker@1",  # the parent's call of the child is marked; no child yet
    "attempt.after_marker@2",  # the child's charge is marked; it has not left
    "tool.after_effect@1",  # the charge reached the provider; nothing of it journaled
    "tool.after_call@1",  # the charge returned; its result is not recorded
    "result.after_record@1",  # the charge's result is committed
    "end.before_marker@1",  # the child's answer is in hand; its end is not recorded
    "tool.after_call@2",  # the child ended; the parent's call has no result yet
    "result.after_record@2",  # the parent's call's result is committed
    "turn.after_record@2",  # the child's first turn is committed
    "end.before_marker@2",  # the parent's answer is in hand; its end is not recorded
]
"""Points in the order one drive of the tree passes them (the count is over the whole process:
the parent's marker is the first, the child's the second)."""


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("BIDE_TEST_LEDGER", str(path))
    return path


@pytest.mark.parametrize("point", POINTS)
async def test_a_killed_tree_resumes_to_one_child_and_at_most_one_charge(
    journal: Journal, point: str, ledger: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.runtime.children_agents", str(journal.url), "p"],
        cwd=ROOT,
        env=child_env(BIDE_CRASH=point, BIDE_TEST_LEDGER=str(ledger)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, f"{point} was not reached: {done.stdout} {done.stderr[-2000:]}"
    for _ in range(6):
        result = await A.parent().run("p", "bill ann", journal=journal, wait=30)
        if result.status.value == "completed":
            break
        assert result.status.value in ("halted", "waiting"), result
        await _settle(journal, "p")
        await _settle(journal, "p/c1")
    assert result.status.value == "completed" and result.output == "done", result
    assert len(A.charges()) <= 1
    assert len(set(A.charges())) == len(A.charges())
    runs = sorted(r.run_id for r in (await journal.list_runs(prefix="p")).runs)
    assert runs in (["p", "p/c1"],), runs
    child = await journal.require("p/c1")
    assert child.end is not None and child.end.payload["status"] == "completed"
    assert not child.anomalies() and not (await journal.require("p")).anomalies()


async def _settle(journal: Journal, run_id: str) -> None:
    """Resolve each halted call of the run by what happened: a charge is in the ledger or not;
    the parent's call of the child ran if the child run exists."""
    state = await journal.state(run_id)
    if state is None:
        return
    for call in state.halted_calls():
        if call.call.name == "charge":
            ran = len(A.charges()) > 0
        else:
            ran = await journal.state(run_id + "/" + call.call.id) is not None
        said = Resolution.succeeded({"found": True}) if ran else Resolution.not_executed()
        await journal.resolve(run_id, call.call.id, said, attempt=call.attempt, by="test")
