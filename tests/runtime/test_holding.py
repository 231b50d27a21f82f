"""One task per Journal renews the lease of every drive through it: it renews them all, a lease
another owner took reaches its drive before the drive's next tool, a failed renewal is tried
again, and a renewer that stops for any other reason than the Journal closing stops every drive
that relied on it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    AssistantTurn,
    Journal,
    LeaseLost,
    Owner,
    RunBusy,
    Safety,
    StorageError,
    ToolSpec,
    tool,
)
from runtime.holding import Holding
from runtime.loop import RunDrive
from runtime.messages import Message
from runtime.ownership import Lease
from runtime.testing import MemoryStore, ScriptedModel
from tests.helpers import call

RENEW = 0.02
"""Seconds between renewals in these tests: short, so that a few happen at once."""


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (a renewal is due every ``RENEW`` seconds); fail after long."""
    try:
        async with asyncio.timeout(30):
            while not condition():
                await asyncio.sleep(RENEW / 2)
    except TimeoutError:
        pytest.fail(f"never: {what}")


def renewers() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "bide-lease-renewer"]


@pytest.fixture
async def journal(db_path: Path) -> AsyncIterator[Journal]:
    async with Journal(db_path, lease_ttl=15, lease_renew=RENEW) as j:
        yield j


async def held(journal: Journal, run_id: str) -> Holding:
    holding = Holding(journal.renewer, run_id, Owner.here())
    await holding.acquire()
    return holding


async def test_one_task_renews_every_lease_held_through_a_journal(journal: Journal) -> None:
    holdings = [await held(journal, f"r{i}") for i in range(3)]
    first = {h.run_id: h.lease.expires_ms for h in holdings if h.lease is not None}
    assert len(journal.renewer) == 3 and len(renewers()) == 1
    await until(
        lambda: all(h.lease is not None and h.lease.expires_ms > first[h.run_id] for h in holdings),
        "every lease renewed",
    )
    for h in holdings:
        stored = await journal.lease(h.run_id)
        assert stored is not None and stored.expires_ms > first[h.run_id] and stored.live
        await h.release()
    assert len(journal.renewer) == 0
    await until(lambda: not renewers(), "the renewer ends once nothing is held")
    for h in holdings:
        stored = await journal.lease(h.run_id)
        assert stored is not None and stored.released, "released, not renewed any more"
    again = await held(journal, "r-again")  # a later lease starts a renewer of its own
    assert len(renewers()) == 1
    await again.release()


class HeldModel:
    """Answers like ScriptedModel, once ``release`` is set."""

    def __init__(self, script: Sequence[Mapping[str, Any]]):
        self.inner = ScriptedModel(script)
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        self.asked.set()
        await self.release.wait()
        return await self.inner.complete(system_prompt, messages, tools)


async def test_a_lease_taken_over_reaches_its_drive_before_its_next_tool(
    journal: Journal,
) -> None:
    ran: list[str] = []

    @tool(safety=Safety.READ_ONLY)
    async def look() -> dict[str, Any]:
        """A lookup: it would run before anything of its step commits."""
        ran.append("look")
        return {}

    model = HeldModel([{"tool_calls": [call("c1", "look")]}, {"text": "done"}])
    drive = RunDrive(Agent(model=model, tools=[look]), journal, "r")
    going = asyncio.create_task(drive.go("go", None))
    await model.asked.wait()
    lease = await journal.lease("r")
    assert lease is not None
    await journal.store.acquire("r", Owner.here(), ttl=15, take_over=lease.epoch)
    await until(lambda: drive.holding.lost is not None, "the renewal refused")
    model.release.set()
    with pytest.raises(LeaseLost, match="taken over"):
        await going
    assert ran == [], "a drive that knows its lease is lost runs no further tool"
    assert len(journal.renewer) == 0


class FailingRenewals(MemoryStore):
    """A store whose first renewals fail as a locked database would."""

    def __init__(self, failures: int):
        super().__init__()
        self.failures = failures
        self.renewals = 0

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        self.renewals += 1
        if self.renewals <= self.failures:
            raise StorageError("database is locked", transient=True)
        return await super().renew(lease, ttl=ttl)


async def test_a_failed_renewal_is_tried_again_and_the_lease_kept() -> None:
    store = FailingRenewals(failures=2)
    async with Journal(store=store, lease_ttl=15, lease_renew=RENEW) as journal:
        holding = await held(journal, "r")
        assert holding.lease is not None
        first = holding.lease.expires_ms
        await until(
            lambda: holding.lease is not None and holding.lease.expires_ms > first, "renewed"
        )
        assert store.renewals >= 3 and holding.lost is None
        holding.check()
        await holding.release()


async def test_a_renewer_that_stops_unexpectedly_stops_every_drive_it_renewed(
    journal: Journal,
) -> None:
    holdings = [await held(journal, f"r{i}") for i in range(2)]
    (renewer,) = renewers()
    renewer.cancel()  # not by the Journal: as any bug or stray cancel would
    await asyncio.gather(renewer, return_exceptions=True)
    await until(lambda: all(h.lost is not None for h in holdings), "the drives told")
    for h in holdings:
        with pytest.raises(LeaseLost, match="no longer renewed"):
            h.check()
        await h.release()  # still released: nobody else took it
        stored = await journal.lease(h.run_id)
        assert stored is not None and stored.released
    assert len(journal.renewer) == 0


async def test_closing_the_journal_stops_its_renewer(db_path: Path) -> None:
    journal = await Journal(db_path, lease_ttl=15, lease_renew=RENEW).open()
    holding = await held(journal, "r")
    renewer = journal.renewer
    await journal.close()
    assert not renewers() and holding.lost is None
    with pytest.raises(StorageError, match="closed"):
        renewer.hold(Holding(renewer, "s", Owner.here()))


class Calls(MemoryStore):
    """A store that notes which appends released the lease, and every separate release."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def append(self, run_id: str, key: str, *args: Any, **kwargs: Any) -> Any:
        appended = await super().append(run_id, key, *args, **kwargs)
        self.seen.append(f"{key}+release" if appended.released else key)
        return appended

    async def release(self, lease: Lease) -> bool:
        self.seen.append("release")
        return await super().release(lease)


@tool
async def charge() -> dict[str, Any]:
    """A side effect."""
    return {"charged": True}


@tool
async def lost_charge() -> dict[str, Any]:
    """A side effect whose outcome is unknown."""
    raise RuntimeError("connection reset")


@pytest.mark.parametrize(
    ("name", "seen"),
    [
        ("charge", ["start", "attempt/c1/1", "result/c1/1", "end+release"]),
        ("lost_charge", ["start", "attempt/c1/1", "halt/c1/1", "release"]),
    ],
)
async def test_the_release_rides_with_the_end(name: str, seen: list[str]) -> None:
    """A run that ends frees its lease in the transaction of its end record; a drive that
    stops without an end (halted here) releases it on its own."""
    store = Calls()
    async with Journal(store=store) as journal:
        script = [{"tool_calls": [call("c1", name)]}, {"text": "done"}]
        agent = Agent(model=ScriptedModel(script), tools=[charge, lost_charge])
        await agent.run("r", "go", journal=journal)
        assert store.seen == seen
        lease = await journal.lease("r")
        assert lease is not None and lease.released
        assert len(journal.renewer) == 0


class HangingRenewal(MemoryStore):
    """A store whose first renewal never answers, as a connection stuck mid-request."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        self.renewals += 1
        if self.renewals == 1:
            await asyncio.Event().wait()
        return await super().renew(lease, ttl=ttl)


async def test_a_renewal_that_never_answers_is_given_up_and_tried_again() -> None:
    store = HangingRenewal()
    async with Journal(store=store, lease_ttl=15, lease_renew=RENEW) as journal:
        holding = await held(journal, "r")
        assert holding.lease is not None
        first = holding.lease.expires_ms
        await until(
            lambda: holding.lease is not None and holding.lease.expires_ms > first,
            "renewed after the stuck renewal",
        )
        assert store.renewals >= 2 and holding.lost is None
        await holding.release()


async def test_a_wait_for_a_live_holder_is_logged_once_naming_it(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    """A drive that waits (``wait=``) for a lease another live owner holds says so, once, with
    the holder: a wait of seconds is never a silent stall."""
    holding = await held(journal, "r")
    second = Holding(journal.renewer, "r", Owner.here())
    with caplog.at_level("INFO"), pytest.raises(RunBusy):
        await second.acquire(wait=0.3)
    waits = [r.message for r in caplog.records if "lease_wait" in r.message]
    assert len(waits) == 1
    assert f"process {os.getpid()} on host" in waits[0]
    await holding.release()
