"""Failures of the journal itself: a failed K-th write swept over a whole run, a real SIGKILL
between the effect and its result, and a result that arrives after a resolution."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    Journal,
    Resolution,
    RunBusy,
    RunStatus,
    StorageError,
    ToolContext,
    tool,
)
from runtime.testing import ScriptedModel
from tests.conftest import child_env
from tests.helpers import Ledger, call, inject, make_tools

SCRIPT = [
    {
        "tool_calls": [
            call("c1", "lookup", customer="ann"),
            call("c2", "upsert", customer="ann", note="n"),
        ]
    },
    {"tool_calls": [call("c3", "charge", customer="ann", amount=9)]},
    {"text": "done"},
]


def agent(ledger: Ledger) -> Agent:
    return Agent(model=ScriptedModel(SCRIPT), tools=list(make_tools(ledger).values()))


async def reference_writes(db: Path) -> int:
    async with Journal(db) as j:
        faulty = inject(j, 10**9, after_commit=False)
        assert (await agent(Ledger()).run("ref", "go", journal=j)).status is RunStatus.COMPLETED
        return faulty.writes


async def test_failing_every_kth_write_never_fires_a_side_effect_twice(tmp_path: Path) -> None:
    total = await reference_writes(tmp_path / "ref.db")
    # create, start, turn 1 with lookup's result (or alone, should the IDEMPOTENT upsert
    # start first), upsert's result, turn 2 with the charge's marker, its result, turn 3 with
    # the end.
    assert total >= 7
    outcomes: dict[tuple[int, bool], str] = {}
    for k in range(1, total + 1):
        for after in (False, True):
            ledger = Ledger()
            db = tmp_path / f"k{k}-{after}.db"
            async with Journal(db) as j:
                inject(j, k, after_commit=after)
                try:
                    result = await agent(ledger).run("r", "go", journal=j)
                except StorageError:
                    result = None
            status = result.status if result else None
            for _ in range(5):  # resume until terminal (or halted: it stays halted)
                if status in (RunStatus.COMPLETED, RunStatus.HALTED):
                    break
                async with Journal(db) as j:
                    status = (await agent(ledger).run("r", "go", journal=j)).status
            assert status in (RunStatus.COMPLETED, RunStatus.HALTED), (k, after, status)
            assert ledger.count("charge") <= 1, (k, after)
            if status is RunStatus.COMPLETED:
                assert ledger.count("charge") == 1, (k, after)
                assert ledger.count("upsert") >= 1 and len(set(ledger.keys("upsert"))) == 1
            else:
                async with Journal(db) as j:
                    state = await j.require("r")
                assert [c.call.id for c in state.halted_calls()] == ["c3"]
            outcomes[(k, after)] = status.value
    assert "halted" in outcomes.values(), "the sweep never reached the halt path"
    assert "completed" in outcomes.values()


CHILD = """
from runtime import faults
faults.arm_from_environment()
import asyncio, sys
from runtime import Agent, Journal
from runtime.testing import ScriptedModel
from tests.helpers import Ledger, make_tools
from tests.runtime.test_faults import SCRIPT

async def main(db):
    async with Journal(db) as j:
        agent = Agent(model=ScriptedModel(SCRIPT), tools=list(make_tools(Ledger()).values()))
        result = await agent.run("r", "go", journal=j)
        print(result.status.value)

asyncio.run(main(sys.argv[1]))
"""


def test_a_process_killed_after_the_effect_halts_when_resumed_in_a_fresh_process(
    db_path: Path,
) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path)],
        env=child_env(BIDE_CRASH="tool.after_call@3"),  # lookup, upsert, then the charge
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for _ in range(2):
        resumed = subprocess.run(
            [sys.executable, "-c", CHILD, str(db_path)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.splitlines()[-1] == "halted"

    async def check() -> None:
        async with Journal(db_path) as j:
            state = await j.require("r")
            assert [c.call.id for c in state.halted_calls()] == ["c3"]
            assert state.status() == "halted"

    asyncio.run(check())


async def test_a_result_that_arrives_after_a_not_executed_resolution_is_kept_and_not_rerun(
    journal: Journal,
) -> None:
    ledger = Ledger()
    entered = asyncio.Event()
    release = asyncio.Event()

    @tool(name="charge")
    async def charge(customer: str, amount: int, context: ToolContext) -> dict[str, Any]:
        ledger.executions.append(("charge", {}, context.idempotency_key))
        entered.set()
        await release.wait()
        return {"charged": amount}

    tools = make_tools(ledger)
    tools["charge"] = charge
    a = Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values()))
    task = asyncio.create_task(a.run("r", "go", journal=journal))
    await entered.wait()
    # An operator wrongly says "not executed" while the call is in flight: refused, then forced.
    with pytest.raises(RunBusy, match="still running"):
        await journal.resolve("r", "c3", Resolution.not_executed(), by="hasty")
    assert await journal.resolve("r", "c3", Resolution.not_executed(), by="hasty", force=True)
    release.set()
    result = await task
    assert result.status is RunStatus.COMPLETED
    state = await journal.require("r")
    assert state.calls["c3"].message_content() == ({"charged": 9}, False)
    again = await Agent(model=ScriptedModel(SCRIPT), tools=list(tools.values())).resume(
        "r", journal=journal
    )
    assert again.status is RunStatus.COMPLETED
    assert ledger.count("charge") == 1


@pytest.mark.parametrize("k", [3, 4])
async def test_retry_safe_calls_rerun_after_a_crash_before_their_result(
    journal: Journal, k: int
) -> None:
    """Write 3 is turn 1 with its READ_ONLY call's result (when it fails, the IDEMPOTENT
    call's flush commits the turn alone before its effect), write 4 the IDEMPOTENT result."""
    ledger = Ledger()
    inject(journal, k, after_commit=False)
    with pytest.raises(StorageError):
        await agent(ledger).run("r", "go", journal=journal)
    async with Journal(journal.path) as fresh:
        result = await agent(ledger).resume("r", journal=fresh)
        state = await fresh.require("r")
    assert result.status is RunStatus.COMPLETED
    assert ledger.count("lookup") + ledger.count("upsert") == 3, "exactly one call re-ran"
    assert len(set(ledger.keys("upsert"))) == 1
    assert all(
        r.payload.get("safety") != "side_effect"
        for r in state.records
        if r.kind == "attempt" and r.payload["call_id"] in ("c1", "c2")
    )


def test_importing_bide_arms_no_crash_point_whatever_the_environment() -> None:
    code = "import runtime, runtime.faults as f; print(f._armed)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(BIDE_CRASH="tool.after_call"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "None"), done.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [("bogus", "unknown crash point 'bogus'"), ("tool.after_call@x", "positive integer")],
)
def test_a_bad_crash_spec_is_one_clear_line_from_the_cli(
    tmp_path: Path, spec: str, says: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runtime", "list", "--db", str(tmp_path / "none.db")],
        env=child_env(BIDE_CRASH=spec),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("bide: error: BIDE_CRASH: ") and says in line
