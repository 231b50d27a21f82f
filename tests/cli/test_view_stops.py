"""What ``list`` and ``show`` say about runs no drive will finish on its own: a run that never
started, a cancelled run whose side effect may have acted, a run with a damaged record; and
the exit code a cron job alerts on."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from runtime import BudgetError, Journal, ModelError, Resolution
from tests.cli import agents, view_agents
from tests.cli.invoke import Cli, child
from tests.cli.journals import waiting_run


def _table(out: str) -> dict[str, list[str]]:
    _header, *rows = out.splitlines()
    return {row.split()[0]: row.split() for row in rows}


def _runs(cli: Cli, *argv: str) -> dict[str, dict[str, object]]:
    done = cli("list", *argv, "--json")
    return {r["run_id"]: r for r in done.json()["runs"]}


# --- a run killed between its header and its start record -------------------------------------


@pytest.fixture(scope="module")
def never(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A journal holding one run whose process was SIGKILLed right after the header commit, and
    one run that completed."""
    db = str(tmp_path_factory.mktemp("never") / "bide.db")
    done = child("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "done", "go")
    assert done.code == 0, done.err
    killed = child(
        "run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "never", "go",
        BIDE_CRASH="write.after_commit@1",
    )  # fmt: skip
    assert killed.code == -signal.SIGKILL, killed.err
    return db


def test_a_run_killed_before_its_start_record_is_never_started_in_list(
    cli: Cli, never: str
) -> None:
    listed = cli("list", "--db", never)
    assert listed.code == 0
    assert _table(listed.out)["never"][1] == "never-started"
    assert _runs(cli, "--db", never)["never"]["status"] == "never-started"


def test_list_status_never_started_keeps_exactly_those_and_running_has_none(
    cli: Cli, never: str
) -> None:
    assert list(_runs(cli, "--db", never, "--status", "never-started")) == ["never"]
    assert _runs(cli, "--db", never, "--status", "running") == {}


def test_show_of_a_never_started_run_says_to_run_it_again_with_the_command_resume_gives(
    cli: Cli, never: str
) -> None:
    """Not "resume it": resume refuses such a run. show and resume name the same command."""
    shown = cli("show", "--db", never, "never")
    assert shown.code == 0
    assert shown.out.splitlines()[0] == "run never: never-started"
    assert "never started: its process stopped before the input was journaled" in shown.out
    assert "resume it" not in shown.out
    (again,) = [line for line in shown.out.splitlines() if line.startswith("  start it again: ")]
    command = again.removeprefix("  start it again: ")
    assert command == f"bide run --db {never} --run-id never --agent SPEC INPUT"
    resumed = cli("resume", "--db", never, "never")
    assert resumed.code == 2
    assert f"`{command}`" in resumed.error_line
    assert "never started" in resumed.error_line
    assert cli("show", "--db", never, "never", "--json").json()["status"] == "never-started"


# --- a cancelled run whose side effect may have acted ------------------------------------------


async def _build_stops(path: Path) -> None:
    async with Journal(path) as journal:
        await agents.agent.run("completed", "go", journal=journal)
        await agents.halting.run("halted", "go", journal=journal)
        await agents.halting.run("cancel-asked", "go", journal=journal)
        await journal.cancel("cancel-asked", reason="wrong amount", by="carol")
        await agents.halting.run("cancel-ended", "go", journal=journal)
        await journal.cancel("cancel-ended", by="carol")
        await agents.halting.resume("cancel-ended", journal=journal)  # ends it: cancelled
        await waiting_run(journal, "cancel-clean")
        await journal.cancel("cancel-clean", by="carol")
        await agents.halting.run("resolved", "go", journal=journal)
        await journal.resolve("resolved", "c1", Resolution.failed("declined"), by="alice")
        await agents.halting.resume("resolved", journal=journal)


@pytest.fixture(scope="module")
def stops(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("stops") / "bide.db"
    asyncio.run(_build_stops(path))
    return str(path)


UNRESOLVED = {"halted", "cancel-asked", "cancel-ended"}


def test_the_journal_holds_what_the_next_tests_rely_on(cli: Cli, stops: str) -> None:
    runs = _runs(cli, "--db", stops)
    assert {k: r["status"] for k, r in runs.items()} == {
        "completed": "completed",
        "halted": "halted",
        "cancel-asked": "cancelled",
        "cancel-ended": "cancelled",
        "cancel-clean": "cancelled",
        "resolved": "completed",
    }
    with sqlite3.connect(stops) as conn:
        ended = {r for (r,) in conn.execute("SELECT run_id FROM bide_records WHERE key = 'end'")}
    assert "cancel-ended" in ended and "cancel-asked" not in ended


@pytest.mark.parametrize("run_id", ["cancel-asked", "cancel-ended"])
def test_a_cancelled_run_keeps_its_unresolved_call_in_list_and_list_json(
    cli: Cli, stops: str, run_id: str
) -> None:
    table = _table(cli("list", "--db", stops).out)
    assert table[run_id][1] == "cancelled"
    assert table[run_id][-3:] == ["halted", "c1", "charge"]
    (halt,) = _runs(cli, "--db", stops)[run_id]["halted"]  # type: ignore[misc]
    assert (halt["kind"], halt["call_id"], halt["tool"], halt["safety"]) == (
        "halted",
        "c1",
        "charge",
        "side_effect",
    )


@pytest.mark.parametrize("run_id", ["cancel-asked", "cancel-ended"])
def test_show_of_a_cancelled_run_says_its_call_may_have_acted_and_how_to_resolve_it(
    cli: Cli, stops: str, run_id: str
) -> None:
    shown = cli("show", "--db", stops, run_id)
    assert shown.out.splitlines()[0] == f"run {run_id}: cancelled"
    assert "unresolved: c1 charge was attempted at +" in shown.out
    assert "has no result: it may have acted (when it halted: outcome unknown: " in shown.out
    assert "). The run is cancelled, so nothing will run it again" in shown.out
    assert f"resolve it: bide resolve --db {stops} {run_id} c1 --succeeded JSON" in shown.out
    (halt,) = cli("show", "--db", stops, run_id, "--json").json()["halted"]
    assert (halt["call_id"], halt["tool"]) == ("c1", "charge")


def test_list_unresolved_finds_every_run_whose_call_may_have_acted_whatever_its_status(
    cli: Cli, stops: str
) -> None:
    assert set(_runs(cli, "--db", stops, "--unresolved")) == UNRESOLVED
    table = _table(cli("list", "--db", stops, "--unresolved").out)
    assert set(table) == UNRESOLVED
    assert set(_runs(cli, "--db", stops, "--unresolved", "--status", "cancelled")) == {
        "cancel-asked",
        "cancel-ended",
    }
    assert set(_runs(cli, "--db", stops, "--unresolved", "--prefix", "cancel-e")) == {
        "cancel-ended"
    }


def test_list_unresolved_limit_keeps_the_newest_matches(cli: Cli, stops: str) -> None:
    every = _runs(cli, "--db", stops, "--unresolved")
    newest = sorted(
        every.values(), key=lambda r: (r["created_ms"], r["run_id"]), reverse=True
    )[:2]  # fmt: skip
    limited = _runs(cli, "--db", stops, "--unresolved", "--limit", "2")
    assert list(limited) == [r["run_id"] for r in newest]


# --- alerting ----------------------------------------------------------------------------------


def test_list_fail_if_any_exits_4_when_it_lists_a_run_and_0_when_it_lists_none(
    cli: Cli, stops: str, never: str
) -> None:
    found = cli("list", "--db", stops, "--unresolved", "--fail-if-any")
    assert found.code == 4 and set(_table(found.out)) == UNRESOLVED
    assert cli("list", "--db", stops, "--unresolved", "--fail-if-any", "--json").code == 4
    clean = cli("list", "--db", never, "--unresolved", "--fail-if-any")
    assert (clean.code, clean.out.splitlines()[-1]) == (0, "(no runs)")
    assert cli("list", "--db", stops, "--unresolved").code == 0  # without it: a listing


def test_list_fail_if_any_from_a_shell_exits_4(stops: str) -> None:
    """What a cron job sees: the exit status of the process."""
    done = child("list", "--db", stops, "--unresolved", "--fail-if-any")
    assert done.code == 4, done.err


# --- a damaged record --------------------------------------------------------------------------


@pytest.fixture
def damaged(db_path: Path) -> tuple[str, int]:
    """A journal with a completed run, a halted run and run ``bad``, whose ``turn/1`` the test
    edits in the file; returns the path and that record's seq."""

    async def build() -> None:
        async with Journal(db_path) as journal:
            await agents.agent.run("good", "go", journal=journal)
            await agents.halting.run("bad", "go", journal=journal)
            await agents.halting.run("halted", "go", journal=journal)

    asyncio.run(build())
    with sqlite3.connect(db_path) as conn:
        ((seq,),) = conn.execute(
            "SELECT seq FROM bide_records WHERE run_id = 'bad' AND key = 'turn/1'"
        ).fetchall()
    return str(db_path), seq


def _damage(db: str, payload: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE bide_records SET payload = ? WHERE run_id = 'bad' AND key = 'turn/1'",
            (payload,),
        )


MALFORMED = ["{oops", '{"n": 1}', "[1, 2]", '{"n": 1, "turn": {"tool_calls": 7}}']


@pytest.mark.parametrize("payload", MALFORMED)
def test_one_unreadable_record_costs_its_own_run_not_the_listing(
    cli: Cli, damaged: tuple[str, int], payload: str
) -> None:
    db, seq = damaged
    _damage(db, payload)
    listed = cli("list", "--db", db)
    assert listed.code == 0, listed.err
    table = _table(listed.out)
    assert {k: row[1] for k, row in table.items()} == {
        "good": "completed",
        "bad": "unreadable",
        "halted": "halted",
    }
    (bad,) = [line for line in listed.out.splitlines() if line.startswith("bad ")]
    assert "record 'turn/1' of run 'bad' " in bad and f"(seq {seq})" in bad
    runs = _runs(cli, "--db", db)
    assert runs["bad"]["status"] == "unreadable"
    assert str(runs["bad"]["unreadable"]).startswith("record 'turn/1' of run 'bad' ")
    assert f"(seq {seq})" in str(runs["bad"]["unreadable"])
    assert runs["good"]["unreadable"] is None


def test_a_run_that_cannot_be_read_is_kept_by_status_filters_it_may_match(
    cli: Cli, damaged: tuple[str, int]
) -> None:
    """Its status is unknown: it may be halted. Hiding it from `--status halted` would hide a
    call that may have acted."""
    db, _seq = damaged
    _damage(db, "{oops")
    halted = cli("list", "--db", db, "--status", "halted")
    assert halted.code == 0, halted.err
    assert set(_table(halted.out)) == {"halted", "bad"}
    assert set(_runs(cli, "--db", db, "--unresolved")) == {"halted", "bad"}
    assert set(_runs(cli, "--db", db, "--status", "unreadable")) == {"bad"}
    assert cli("list", "--db", db, "--status", "unreadable", "--fail-if-any").code == 4


@pytest.mark.parametrize("payload", MALFORMED)
def test_show_of_a_run_with_an_unreadable_record_names_it_in_one_line_and_exits_2(
    cli: Cli, damaged: tuple[str, int], payload: str
) -> None:
    db, seq = damaged
    _damage(db, payload)
    shown = cli("show", "--db", db, "bad")
    assert shown.code == 2
    assert shown.out == ""
    assert shown.err.count("\n") == 1, shown.err
    assert shown.error_line.startswith("bide: error: record 'turn/1' of run 'bad' ")
    assert f"(seq {seq})" in shown.error_line
    assert shown.error_line.endswith("; the journal is damaged there")
    assert "unexpected" not in shown.error_line
    assert cli("show", "--db", db, "good").code == 0


def test_a_cancelled_run_waits_for_nothing_in_list_and_show(cli: Cli, stops: str) -> None:
    """Its gate no longer matters: the next drive ends it without asking anyone."""
    assert _runs(cli, "--db", stops)["cancel-clean"]["waiting"] == []
    assert _table(cli("list", "--db", stops).out)["cancel-clean"][-1] != "(0/1)"
    shown = cli("show", "--db", stops, "cancel-clean")
    assert "waiting:" not in shown.out
    assert "cancelled: the next drive stops it" in shown.out
    assert cli("show", "--db", stops, "cancel-clean", "--json").json()["waiting"] == []


def test_show_json_of_a_run_with_an_unreadable_record_is_a_protocol_error(
    cli: Cli, damaged: tuple[str, int]
) -> None:
    db, seq = damaged
    _damage(db, "{oops")
    shown = cli("show", "--db", db, "bad", "--json")
    error = shown.json()["error"]
    assert (shown.code, error["type"], error["exit_code"]) == (2, "ProtocolError", 2)
    assert error["message"].startswith(
        f"record 'turn/1' of run 'bad' is not valid JSON (seq {seq}): "
    )


# --- a drive that stopped short of an end; the cause behind a halt ----------------------------


async def _build_orphans(path: Path) -> None:
    async with Journal(path) as journal:
        with pytest.raises(BudgetError):
            await agents.one_turn_budget.run("budget", "go", journal=journal)
        with pytest.raises(ModelError):
            await agents.model_unavailable.run("unavailable", "go", journal=journal)
        await view_agents.provider_fails.run("502", "go", journal=journal)
        await view_agents.provider_fails.resume("502", journal=journal)  # halts again


@pytest.fixture(scope="module")
def orphans(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("orphans") / "bide.db"
    asyncio.run(_build_orphans(path))
    return str(path)


def test_a_run_whose_drive_stopped_short_is_orphaned_with_its_reason_in_list(
    cli: Cli, orphans: str
) -> None:
    table = _table(cli("list", "--db", orphans).out)
    assert table["budget"][1] == "orphaned" and table["budget"][-2:] == ["stopped:", "max_turns"]
    assert table["unavailable"][-2:] == ["stopped:", "model_unavailable"]
    runs = _runs(cli, "--db", orphans)
    assert runs["budget"]["stopped"]["reason"] == "max_turns"  # type: ignore[index]
    assert runs["502"]["stopped"] is None
    assert set(_runs(cli, "--db", orphans, "--status", "orphaned")) == {"budget", "unavailable"}


def test_show_of_an_orphaned_run_says_why_it_stopped_and_how_to_continue(
    cli: Cli, orphans: str
) -> None:
    shown = cli("show", "--db", orphans, "budget")
    assert shown.out.splitlines()[0] == "run budget: orphaned"
    assert "the drive stopped short of an end: run 'budget' reached max_turns=1" in shown.out
    assert "orphaned: no process drives it; its last drive stopped short of an end" in shown.out
    assert "To continue: raise max_turns in the agent, then resume." in shown.out
    assert f"resume it: bide resume --db {orphans} budget" in shown.out
    stopped = cli("show", "--db", orphans, "budget", "--json").json()["stopped"]
    assert stopped["reason"] == "max_turns"


def test_the_exception_behind_a_halt_is_shown_on_every_later_view(cli: Cli, orphans: str) -> None:
    shown = cli("show", "--db", orphans, "502")
    assert "c1 charge attempt 1: raised RuntimeError: provider said 502" in shown.out
    assert "(when it halted: raised RuntimeError: provider said 502" in shown.out
    (halt,) = _runs(cli, "--db", orphans)["502"]["halted"]  # type: ignore[misc]
    assert "provider said 502" in halt["cause"]
    (shown_halt,) = cli("show", "--db", orphans, "502", "--json").json()["halted"]
    assert shown_halt["cause"] == halt["cause"]


def test_a_status_word_edited_into_an_end_record_is_escaped_in_list(
    cli: Cli, damaged: tuple[str, int]
) -> None:
    db, _seq = damaged
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE bide_records SET payload = ? WHERE run_id = 'good' AND key = 'end'",
            ('{"status": "\\u001b[2J\\u202eowned", "output": null, "error": null}',),
        )
    listed = cli("list", "--db", db)
    assert not {"\x1b", "\u202e"} & set(listed.out)
    assert "\\x1b[2J\\u202eowned" in listed.out


# --- what the records should never hold ---------------------------------------------------------


def test_show_flags_a_run_whose_records_follow_its_end(cli: Cli, db_path: Path) -> None:
    """As an older bide could leave it: a turn journaled after the end."""

    async def build() -> None:
        async with Journal(db_path) as journal:
            await agents.agent.run("r", "go", journal=journal)

    asyncio.run(build())
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
            "VALUES ('r', 'turn/3', 'turn', 'json', ?, 0)",
            ('{"n": 3, "turn": {"text": "again", "tool_calls": []}, "plan": {}}',),
        )
        ((seq,),) = conn.execute("SELECT seq FROM bide_records WHERE key = 'turn/3'").fetchall()
    shown = cli("show", "--db", str(db_path), "r")
    assert f"WARNING: records after the end: turn/3 (seq {seq})" in shown.out.splitlines()
    anomalies = cli("show", "--db", str(db_path), "r", "--json").json()["anomalies"]
    assert anomalies == [f"records after the end: turn/3 (seq {seq})"]
