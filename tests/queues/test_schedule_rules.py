"""A schedule's slots: which are due, which are skipped or caught up, across DST, and its
validation."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from runtime import Journal, Worker
from runtime.errors import ConfigError
from runtime.journal.schedules import Schedule
from tests.queues import agents


def ms(text: str, tz: str = "UTC") -> int:
    when = dt.datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz))
    return round(when.timestamp() * 1000)


def daily(missed: str = "skip", catch_up: int = 1, tz: str = "Europe/Paris") -> Schedule:
    return Schedule("s", "0 9 * * *", "a:b", "go", tz=tz, missed=missed, catch_up=catch_up)  # type: ignore[arg-type]


def test_a_slot_due_now_starts_and_moves_the_cursor() -> None:
    s = daily()
    since = ms("2026-12-03T08:00:00", "Europe/Paris")
    now = ms("2026-12-03T09:00:00.300", "Europe/Paris")
    slots, newest = s.due(since, None, now)
    assert slots == [ms("2026-12-03T09:00:00", "Europe/Paris")] and newest == slots[0]
    assert s.run_id(slots[0]) == "schedule:s:20261203T080000Z"
    assert s.due(since, newest, now) == ([], None)


def test_skip_starts_nothing_older_than_a_minute_but_moves_past_it() -> None:
    since = ms("2026-12-01T08:00:00", "Europe/Paris")
    now = ms("2026-12-03T12:00:00", "Europe/Paris")
    slots, newest = daily().due(since, None, now)
    assert slots == [] and newest == ms("2026-12-03T09:00:00", "Europe/Paris")


def test_catch_up_starts_the_newest_n_missed_slots_oldest_first() -> None:
    since = ms("2026-11-20T08:00:00", "Europe/Paris")
    now = ms("2026-12-03T12:00:00", "Europe/Paris")
    slots, newest = daily("catch-up", 3).due(since, None, now)
    days = [dt.datetime.fromtimestamp(s / 1000, ZoneInfo("Europe/Paris")).day for s in slots]
    assert days == [1, 2, 3] and newest == slots[-1]


def test_dst_spring_forward_runs_a_0230_job_once_at_0300() -> None:
    s = Schedule("s", "30 2 * * *", "a:b", "go", tz="Europe/Paris", missed="catch-up", catch_up=5)
    since = ms("2026-03-28T12:00:00", "Europe/Paris")
    now = ms("2026-03-30T12:00:00", "Europe/Paris")
    slots, _ = s.due(since, None, now)
    local = [dt.datetime.fromtimestamp(x / 1000, ZoneInfo("Europe/Paris")) for x in slots]
    assert [(t.day, t.hour, t.minute) for t in local] == [(29, 3, 0), (30, 2, 30)]


def test_dst_fall_back_runs_a_0130_job_once() -> None:
    s = Schedule(
        "s", "30 1 * * *", "a:b", "go", tz="America/New_York", missed="catch-up", catch_up=5
    )
    since = ms("2026-10-31T12:00:00", "America/New_York")
    now = ms("2026-11-02T12:00:00", "America/New_York")
    slots, _ = s.due(since, None, now)
    assert len(slots) == 2  # Nov 1 (once, though 01:30 happens twice) and Nov 2


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cron": "0 25 * * *"}, "bad cron"),
        ({"tz": "Mars/Base"}, "unknown time zone"),
        ({"missed": "sometimes"}, "missed"),
        ({"missed": "catch-up", "catch_up": 0}, "catch_up"),
        ({"agent": "nocolon"}, "agent"),
        ({"name": "a:b"}, "no ':'"),
    ],
)
def test_a_bad_schedule_is_refused_naming_what_is_wrong(fields: dict, match: str) -> None:
    values = {"name": "s", "cron": "0 9 * * *", "agent": "a:b", "input": "go"} | fields
    with pytest.raises(ConfigError, match=match):
        Schedule(**values)


async def test_a_schedule_whose_agent_fails_is_said_once_and_others_go_on(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Journal(db_path) as journal:
        every = {"cron": "* * * * * *", "input": "go", "missed": "catch-up", "catch_up": 5}
        await journal.schedules.add("broken", agent="tests.nowhere:agent", **every)  # type: ignore[arg-type]
        await journal.schedules.add("fine", agent="tests.queues.agents:worker_agent", **every)  # type: ignore[arg-type]

        def open_spec(spec: str):  # type: ignore[no-untyped-def]
            from runtime.cli.specs import open_agent

            return open_agent(spec)

        import asyncio

        async with Worker(journal, open_agent=open_spec, poll=0.1):
            await asyncio.sleep(2.5)
        runs = [r.run_id for r in (await journal.list_runs()).runs]
        assert runs and all(r.startswith("schedule:fine:") for r in runs)
    failed = [r for r in caplog.records if "schedule_failed" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in failed]


async def test_the_cli_refuses_a_schedule_whose_agent_does_not_import(db_path: Path) -> None:
    from tests.console.conftest import cli

    add = ("--db", str(db_path), "schedule", "add", "x", "--cron", "* * * * *", "--input", "go")
    assert cli(*add, "--agent", "tests.nowhere:agent") == 2
    assert agents.worker_agent is not None
