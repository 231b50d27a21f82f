"""The Worker, in process on a real journal file: it drives what needs driving and nothing else."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    ConfigError,
    Journal,
    Owner,
    RunStatus,
    Safety,
    ToolContext,
    ToolOutcomeUnknown,
    Worker,
    single_approval,
    tool,
)
from runtime.ownership import this_host
from runtime.reconcile import Attempt, Found, Unknown
from runtime.testing import ScriptedModel
from tests.helpers import call

ANSWER = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]


def charging(charged: list[str]) -> Agent:
    @tool
    async def charge(amount: int) -> dict[str, int]:
        """A side effect, counted."""
        charged.append("x")
        return {"charged": amount}

    return Agent(model=ScriptedModel(ANSWER), tools=[charge])


async def until(what: str, check: Callable[[], Any]) -> None:
    try:
        async with asyncio.timeout(30):
            while not await check():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{what}: not within 30 s") from None


async def statuses(journal: Journal, run_ids: list[str]) -> dict[str, str | None]:
    return {r: await journal.status(r) for r in run_ids}


async def test_a_worker_drives_submitted_runs_to_their_end(db_path: Path) -> None:
    charged: list[str] = []
    agent = charging(charged)
    run_ids = [f"r{i}" for i in range(20)]
    async with Journal(db_path) as journal:
        for run_id in run_ids:
            submitted = await agent.submit(run_id, "go", journal=journal)
            assert submitted.status is RunStatus.SUBMITTED
        assert await journal.status("r0") == "submitted"
        async with Worker(journal, agent=agent, concurrency=5, poll=0.05) as worker:

            async def all_done() -> bool:
                return set((await statuses(journal, run_ids)).values()) == {"completed"}

            await until("every run completed", all_done)
        assert worker.finished == dict.fromkeys(run_ids, "completed")
        assert worker.active == [] and worker.skipped == {}
        for run_id in run_ids:
            lease = await journal.lease(run_id)
            assert lease is not None and lease.released and lease.owner.worker == worker.name
    assert len(charged) == 20


async def test_a_worker_takes_over_a_run_whose_process_died(db_path: Path) -> None:
    charged: list[str] = []
    agent = charging(charged)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    async with Journal(db_path) as journal:
        await agent.submit("r", "go", journal=journal)
        await journal.store.update_index("r", status="running")
        gone = Owner("x", this_host(), dead.pid, None, 0)
        held = await journal.store.acquire("r", gone, ttl=600)
        async with Worker(journal, agent=agent, poll=0.05) as worker:
            await until("completed", lambda: _is(journal, "r", "completed"))
        lease = await journal.lease("r")
    assert lease is not None and lease.epoch == held.epoch + 1
    assert lease.owner.worker == worker.name
    assert charged == ["x"]


async def test_a_run_live_elsewhere_and_runs_waiting_or_halted_are_left_alone(
    db_path: Path,
) -> None:
    agent = charging([])
    async with Journal(db_path) as journal:
        for run_id in ("elsewhere", "waiting", "halted"):
            await agent.submit(run_id, "go", journal=journal)
        far = Owner("y", "another-host", 1, None, 0)
        await journal.store.acquire("elsewhere", far, ttl=600)
        await journal.store.update_index("waiting", status="waiting")
        await journal.store.update_index("halted", status="halted")
        async with Worker(journal, agent=agent, poll=0.02, idle_exit=0.3) as worker:
            await asyncio.sleep(0.5)
    assert worker.claimed == 0


async def test_a_run_whose_agent_cannot_be_built_is_reported_once_and_left_alone(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def open_agent(spec: str) -> AsyncIterator[Agent]:
        opened.append(spec)
        raise ConfigError(f"agent spec {spec!r}: no module named 'gone'")
        yield  # pragma: no cover

    async with Journal(db_path) as journal:
        await charging([]).submit("r", "go", journal=journal, spec="gone:agent")
        async with Worker(journal, open_agent=open_agent, poll=0.02) as worker:
            await asyncio.sleep(0.5)
        assert await journal.status("r") == "submitted"
        lease = await journal.lease("r")
    assert opened == ["gone:agent"]
    assert worker.skipped == {"r": "ConfigError: agent spec 'gone:agent': no module named 'gone'"}
    assert [r.message for r in caplog.records if "worker_skipped_run" in r.message] != []
    assert lease is not None and lease.released


async def test_approving_a_waiting_run_makes_it_ready_for_a_worker(db_path: Path) -> None:
    wired: list[int] = []

    @tool(approval=single_approval())
    async def charge(amount: int) -> dict[str, int]:
        """A gated side effect."""
        wired.append(amount)
        return {"charged": amount}

    agent = Agent(model=ScriptedModel(ANSWER), tools=[charge])
    async with Journal(db_path) as journal:
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.WAITING
        async with Worker(journal, agent=agent, poll=0.02) as worker:
            await asyncio.sleep(0.3)
            assert worker.claimed == 0  # waiting: nothing to drive
            await journal.approve("r", "c1", by="alice")
            await until("completed", lambda: _is(journal, "r", "completed"))
    assert wired == [5]


async def test_stopping_a_worker_leaves_its_runs_at_a_record_boundary_for_the_next(
    db_path: Path,
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    @tool(safety=Safety.READ_ONLY)
    async def lookup() -> dict[str, bool]:
        """A slow read."""
        started.set()
        await release.wait()
        return {"found": True}

    script = [
        {"tool_calls": [call("c1", "lookup")]},
        {"tool_calls": [call("c2", "lookup")]},
        {"text": "done"},
    ]
    agent = Agent(model=ScriptedModel(script), tools=[lookup])
    async with Journal(db_path) as journal:
        await agent.submit("r", "go", journal=journal)
        first = Worker(journal, agent=agent, poll=0.02, grace=10)
        async with first:
            await started.wait()
            first.stop()
            release.set()  # the call in flight finishes; no further turn starts
        assert first.finished == {}
        state = await journal.require("r")
        assert [c for c in state.calls] == ["c1"] and state.calls["c1"].result is not None
        assert await journal.status("r") == "orphaned"
        async with Worker(journal, agent=agent, poll=0.02) as second:
            await until("completed", lambda: _is(journal, "r", "completed"))
    assert second.finished == {"r": "completed"}


async def _is(journal: Journal, run_id: str, status: str) -> bool:
    return await journal.status(run_id) == status


async def test_a_failing_claim_pass_is_logged_and_the_worker_goes_on(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    charged: list[str] = []
    agent = charging(charged)
    async with Journal(db_path) as journal:
        await agent.submit("r", "go", journal=journal)
        real = journal.store.claimable
        failures = [RuntimeError("a bug in the claim")]

        async def flaky(**kw: Any) -> Any:
            if failures:
                raise failures.pop()
            return await real(**kw)

        journal.store.claimable = flaky  # type: ignore[method-assign]
        async with Worker(journal, agent=agent, poll=0.02):
            await until("completed", lambda: _is(journal, "r", "completed"))
    assert charged == ["x"]
    assert any("a bug in the claim" in r.getMessage() for r in caplog.records)


class LostCharges:
    """A charge whose answer is always lost (it halts), and whose reconciler finds it only once
    the provider is back (``back``): before that it says unknown."""

    def __init__(self) -> None:
        self.back = False

        async def find(attempt: Attempt) -> Found | Unknown:
            if self.back:
                return Found({"charged": 5}, "the provider has it")
            return Unknown("the provider is down")

        @tool(reconcile=find)
        async def charge(amount: int) -> dict[str, int]:
            raise ToolOutcomeUnknown("the answer was lost")

        self.charge = charge


async def test_a_worker_reconciles_every_halted_run_however_many_wait_for_a_person(
    db_path: Path,
) -> None:
    """Sixty runs halted after it, waiting for a person (their tool has no reconciler), do not
    hide an older halted run whose reconciler can settle it now."""
    lost = LostCharges()
    charge = lost.charge

    @tool
    async def email(to: str) -> str:
        raise ToolOutcomeUnknown("the answer was lost")

    mail = [{"tool_calls": [call("c1", "email", to="ann")]}, {"text": "done"}]
    async with Journal(db_path) as journal:
        old = await Agent(model=ScriptedModel(ANSWER), tools=[charge]).run(
            "old", "go", journal=journal
        )
        assert old.status is RunStatus.HALTED
        for i in range(60):
            agent = Agent(model=ScriptedModel(mail), tools=[email])
            assert (await agent.run(f"new-{i}", "go", journal=journal)).status is RunStatus.HALTED
        lost.back = True
        await asyncio.sleep(1.1)  # the in-drive try's next try (1 s) is due
        both = Agent(model=ScriptedModel(ANSWER), tools=[charge, email])
        async with Worker(journal, agent=both, poll=0.05):

            async def settled() -> bool:
                return await journal.status("old") == "completed"

            await until("the old run settled and completed", settled)
        assert {await journal.status(f"new-{i}") for i in range(60)} == {"halted"}


async def test_a_worker_that_exits_when_idle_first_drives_the_run_its_reconciler_settled(
    db_path: Path,
) -> None:
    """Its reconciler settles a halted run on the pass where nothing else was to be done: that
    run is work for the next pass, not a reason to exit idle."""
    lost = LostCharges()
    charge = lost.charge
    agent = Agent(model=ScriptedModel(ANSWER), tools=[charge])
    async with Journal(db_path) as journal:
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.HALTED
        lost.back = True
        await asyncio.sleep(1.1)  # the in-drive try's next try (1 s) is due
        worker = Worker(journal, agent=agent, poll=0.05, idle_exit=1e-6)
        async with asyncio.timeout(30):
            await worker.run()
        assert await journal.status("r") == "completed"
        assert worker.finished == {"r": "completed"}


async def test_a_second_worker_of_this_host_claims_the_runs_the_first_has_no_room_for(
    db_path: Path,
) -> None:
    """Worker A drives three slow runs (all it has room for); worker B, on the same host with
    three free slots, is handed the three queued runs, not A's live leases to skip."""
    release = asyncio.Event()
    started: list[str] = []

    @tool
    async def charge(amount: int, context: ToolContext) -> dict[str, int]:
        started.append(context.run_id)
        await release.wait()
        return {"charged": amount}

    agent = Agent(model=ScriptedModel(ANSWER), tools=[charge])
    run_ids = [f"r{i}" for i in range(6)]
    async with Journal(db_path) as journal:
        for run_id in run_ids[:3]:
            await agent.submit(run_id, "go", journal=journal)
        async with Worker(journal, agent=agent, concurrency=3, poll=0.05, name="a") as a:

            async def a_full() -> bool:
                return len(started) == 3

            await until("worker a drives three runs", a_full)
            for run_id in run_ids[3:]:
                await agent.submit(run_id, "go", journal=journal)
            async with Worker(journal, agent=agent, concurrency=3, poll=0.05, name="b") as b:

                async def b_full() -> bool:
                    return len(started) == 6

                await until("worker b drives the three queued runs", b_full)
                assert sorted(b.active) == run_ids[3:]
                release.set()

                async def all_done() -> bool:
                    return set((await statuses(journal, run_ids)).values()) == {"completed"}

                await until("every run completed", all_done)
        assert sorted(a.finished) == run_ids[:3] and sorted(b.finished) == run_ids[3:]


async def test_a_worker_with_an_agent_drives_only_that_agents_runs(db_path: Path) -> None:
    """A run of another agent (the runs index records which) is not claimed: its tools are not
    called under this agent's, and this agent's reconcilers do not settle its halted calls.
    ``resume`` by the wrong agent is a ConfigError naming both."""
    theirs: list[str] = []
    lost = LostCharges()
    mine = Agent(model=ScriptedModel(ANSWER), tools=[lost.charge], name="billing")
    lost.back = True  # my reconciler would settle any halted charge it is asked about
    other = Agent(model=ScriptedModel(ANSWER), tools=[charging(theirs).tools["charge"]])
    halting = Agent(model=ScriptedModel(ANSWER), tools=[LostCharges().charge], name="refunds")
    async with Journal(db_path) as journal:
        await other.submit("theirs", "go", journal=journal)
        assert (await halting.run("halted", "go", journal=journal)).status is RunStatus.HALTED
        await asyncio.sleep(1.1)  # the halted run's in-drive try is due again
        async with Worker(journal, agent=mine, poll=0.05) as worker:
            await asyncio.sleep(2.5)  # claim passes, and a reconcile pass (every 2 s)
        assert (worker.claimed, worker.skipped, worker.finished) == (0, {}, {})
        assert await journal.status("theirs") == "submitted"
        assert await journal.status("halted") == "halted"
        assert (await journal.require("halted")).calls["c1"].result is None  # not settled
        with pytest.raises(ConfigError, match="started by agent 'refunds', not 'billing'"):
            await mine.resume("halted", journal=journal)
        assert (await other.resume("theirs", journal=journal)).status is RunStatus.COMPLETED
    assert theirs == ["x"]
