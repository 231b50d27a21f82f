"""``list`` and ``show`` on a journal holding a run in every status."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from runtime import Journal
from runtime.terminal import printable
from tests.cli import agents, view_agents
from tests.cli.invoke import Cli, child
from tests.cli.journals import waiting_run

STATUSES = {
    "completed-run": "completed",
    "failed-run": "failed",
    "cancelled-run": "cancelled",
    "waiting-run": "waiting",
    "halted-run": "halted",
    "orphaned-run": "orphaned",
}
ROW_KEYS = {
    "run_id",
    "status",
    "agent",
    "turns",
    "created_ms",
    "updated_ms",
    "halted",
    "waiting",
    "unreadable",
    "stopped",
    "in_flight",
    "lease",
    "driven",
    "usage",
    "parent",
}
SHOW_KEYS = {
    "run_id",
    "status",
    "agent",
    "spec",
    "input",
    "started_ms",
    "turns",
    "usage",
    "output",
    "error",
    "halted",
    "waiting",
    "events",
    "stopped",
    "anomalies",
    "in_flight",
    "lease",
    "driven",
    "session",
    "parent",
    "children",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One journal, one run per status. The halted and running runs are processes SIGKILLed
    mid-run, so the index still says "running" for both: only their records tell."""
    path = tmp_path_factory.mktemp("statuses") / "bide.db"

    async def build() -> None:
        async with Journal(path) as journal:
            await agents.agent.run("completed-run", "go", journal=journal, spec="t:agent")
            await agents.model_rejects.run("failed-run", "go", journal=journal)
            await waiting_run(journal, "cancelled-run")
            await journal.cancel("cancelled-run", reason="not needed", by="carol")
            await waiting_run(journal, "waiting-run")

    asyncio.run(build())
    ledger = str(path.with_name("ledger.db"))
    for run_id, spec, crash in [
        ("halted-run", "examples.payments:make_agent", "tool.after_call@3"),
        ("orphaned-run", "tests.cli.agents:agent", "turn.after_record@1"),
    ]:
        killed = child(
            "run", "--db", str(path), "--agent", spec, "--run-id", run_id, "go",
            BIDE_CRASH=crash, PAYMENTS_LEDGER=ledger,
        )  # fmt: skip
        assert killed.code == -signal.SIGKILL, killed.err
    return str(path)


def _table(out: str) -> dict[str, list[str]]:
    header, *rows = out.splitlines()
    assert header.split() == [
        "RUN",
        "ID",
        "STATUS",
        "AGENT",
        "TURNS",
        "TOKENS",
        "UPDATED",
        "STOPPED",
        "ON",
    ]
    return {row.split()[0]: row.split() for row in rows}


def test_list_shows_every_run_with_the_status_its_records_give(cli: Cli, db: str) -> None:
    done = cli("list", "--db", db)
    assert done.code == 0
    table = _table(done.out)
    assert {run_id: row[1] for run_id, row in table.items()} == STATUSES
    assert table["halted-run"][-3:] == ["halted", "c3", "charge_card"]
    assert table["waiting-run"][-4:] == ["approval", "c1", "charge", "(0/1)"]
    assert table["completed-run"][3] == "2"  # turns


def test_the_index_still_says_running_for_the_killed_runs(db: str) -> None:
    """What the next tests rely on: a status filter must read records, not only the index."""
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT run_id, status FROM bide_runs").fetchall())
    assert rows["halted-run"] == rows["orphaned-run"] == "running"


@pytest.mark.parametrize(("run_id", "status"), STATUSES.items())
def test_list_status_keeps_exactly_the_runs_in_that_status(
    cli: Cli, db: str, run_id: str, status: str
) -> None:
    done = cli("list", "--db", db, "--status", status, "--json")
    assert [r["run_id"] for r in done.json()["runs"]] == [run_id]


def test_list_json_gives_each_run_its_status_and_what_it_stopped_on(cli: Cli, db: str) -> None:
    runs = {r["run_id"]: r for r in cli("list", "--db", db, "--json").json()["runs"]}
    assert all(set(r) == ROW_KEYS for r in runs.values())
    assert {k: r["status"] for k, r in runs.items()} == STATUSES
    (halt,) = runs["halted-run"]["halted"]
    assert (halt["kind"], halt["call_id"], halt["tool"], halt["safety"]) == (
        "halted",
        "c3",
        "charge_card",
        "side_effect",
    )
    assert [w["kind"] for w in runs["waiting-run"]["waiting"]] == ["approval"]


def test_list_limit_keeps_the_newest_runs(cli: Cli, db: str) -> None:
    every = cli("list", "--db", db, "--json").json()["runs"]
    newest = sorted(every, key=lambda r: (r["created_ms"], r["run_id"]), reverse=True)[:2]
    limited = cli("list", "--db", db, "--limit", "2", "--json").json()["runs"]
    assert [r["run_id"] for r in limited] == [r["run_id"] for r in newest]


def test_list_prefix_keeps_the_runs_whose_id_starts_with_it(cli: Cli, db: str) -> None:
    done = cli("list", "--db", db, "--prefix", "ha", "--json")
    assert [r["run_id"] for r in done.json()["runs"]] == ["halted-run"]


@pytest.mark.parametrize(
    ("run_id", "tells"),
    [
        ("completed-run", ['completed: "all done"']),
        ("failed-run", ['failed: "model error: 503 overloaded"']),
        ("cancelled-run", ['cancel requested by carol: "not needed"', "resume it: bide resume"]),
        ("waiting-run", ["[side_effect, needs approval]", "waiting: c1 charge needs an approval"]),
        (
            "halted-run",
            [
                "attempt 1 marked",
                "halted: c3 charge_card was attempted at +",
                "resolve it: bide resolve --db",
            ],
        ),
        (
            "orphaned-run",
            ["orphaned: not finished, and no live process drives it", "resume it: bide resume"],
        ),
    ],
)
def test_show_tells_each_run_and_what_to_do_next(
    cli: Cli, db: str, run_id: str, tells: list[str]
) -> None:
    done = cli("show", "--db", db, run_id)
    assert done.code == 0
    assert done.out.splitlines()[0] == f"run {run_id}: {STATUSES[run_id]}"
    for text in tells:
        assert text in done.out


def test_show_json_has_the_documented_shape(cli: Cli, db: str) -> None:
    shown = cli("show", "--db", db, "halted-run", "--json").json()
    assert set(shown) == SHOW_KEYS
    assert (shown["status"], shown["spec"], shown["turns"]) == (
        "halted",
        "examples.payments:make_agent",
        3,
    )
    assert [e["kind"] for e in shown["events"]][-2:] == ["turn", "attempt"]
    assert set(shown["events"][0]) == {
        "seq",
        "at_ms",
        "kind",
        "key",
        "call_id",
        "summary",
        "payload",
    }


def test_list_and_show_in_a_child_process_print_what_main_prints(cli: Cli, db: str) -> None:
    for argv in (["list", "--db", db, "--json"], ["show", "--db", db, "waiting-run", "--json"]):
        in_process, in_child = cli(*argv), child(*argv)
        assert (in_child.code, in_child.json()) == (in_process.code, in_process.json())
    table = child("list", "--db", db)
    assert table.code == 0 and _table(table.out).keys() == STATUSES.keys()


def test_show_of_an_unknown_run_is_exit_2(cli: Cli, db: str) -> None:
    done = cli("show", "--db", db, "ghost")
    assert done.code == 2 and done.error_line.startswith("bide: error: no run 'ghost' in ")


def test_list_and_show_never_create_a_journal(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nothing.db"
    for argv in (["list", "--db", str(missing)], ["show", "--db", str(missing), "r"]):
        done = cli(*argv)
        assert done.code == 2
        assert done.error_line.startswith(f"bide: error: no journal at {missing}")
    assert not missing.exists()


def test_nothing_a_model_or_caller_names_reaches_the_terminal_raw(cli: Cli, db_path: Path) -> None:
    """Control characters in run ids, call ids, tool names and answers are escaped on screen."""
    db = str(db_path)
    run_id = f"r{agents.ESCAPES}"
    ran = child(
        "--log-format", "console", "run", "--db", db, "--agent", "tests.cli.agents:escapes",
        "--run-id", run_id, "go",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert "wipe\\x1b[2J" in ran.err
    shown, listed = cli("show", "--db", db, run_id), cli("list", "--db", db)
    for text in (ran.err, shown.out, listed.out):
        assert not {"\x1b", "\x07", "\x9b"} & set(text), text
    assert "c1\\u001b[2J" in shown.out or "c1\\x1b[2J" in shown.out


def test_bidirectional_controls_are_escaped_in_show_list_and_log_lines(
    cli: Cli, db_path: Path
) -> None:
    """A run id, call id, tool name, agent name or answer with U+202E and its kin reorders what a
    terminal shows: show, list and the console progress lines print them escaped."""
    db = str(db_path)
    run_id = f"r{view_agents.BIDI}"
    ran = child(
        "--log-format", "console", "run", "--db", db, "--agent", "tests.cli.view_agents:bidi",
        "--run-id", run_id, "go",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    shown, listed = cli("show", "--db", db, run_id), cli("list", "--db", db)
    for text in (ran.err, shown.out, listed.out):
        assert not set(view_agents.BIDI) & set(text), ascii(text)
    assert "c1\\u202e\\u2066" in shown.out
    assert f"r{printable(view_agents.BIDI)}" in listed.out
    assert "\\u202e" in ran.err


def test_show_says_beside_a_decision_that_did_not_count_why(cli: Cli, db_path: Path) -> None:
    """bob denies, then alice approves the single-approval gate: show must not read as if her
    approval opened it."""
    db = str(db_path)
    ran = cli("run", "--db", db, "--run-id", "r", "--agent", "tests.cli.agents:gated", "go")
    assert ran.code == 3, ran.err
    assert cli("approve", "--db", db, "r", "c1", "--deny", "--by", "bob").code == 0
    assert cli("approve", "--db", db, "r", "c1", "--by", "alice").code == 0
    shown = cli("show", "--db", db, "r")
    lines = shown.out.splitlines()
    decisions = [line.split(" decision ", 1)[1].strip() for line in lines if " decision " in line]
    assert decisions == [
        "c1 wire denied by bob",
        "c1 wire approved by alice, not counted: the gate was already decided: denied by bob",
    ]
    events = cli("show", "--db", db, "r", "--json").json()["events"]
    assert [e["summary"] for e in events if e["kind"] == "decision"] == decisions
