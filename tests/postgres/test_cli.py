"""The CLI on a PostgreSQL journal: ``--db postgresql://...`` and ``$BIDE_DB`` alike, and a run
started by one process resumed, resolved and finished by others."""

from __future__ import annotations

import signal
from pathlib import Path

from examples.payments import PaymentsLedger
from tests.cli.invoke import child


def test_a_run_killed_after_its_charge_is_settled_and_finished_by_other_processes_once(
    pg_url: str, tmp_path: Path
) -> None:
    ledger_file = str(tmp_path / "ledger.db")
    ledger = PaymentsLedger(ledger_file)
    spec = "examples.payments:make_agent"
    killed = child(
        "run",
        "--db",
        pg_url,
        "--agent",
        spec,
        "--run-id",
        "r",
        "charge ann",
        PAYMENTS_LEDGER=ledger_file,
        BIDE_CRASH="tool.after_call@3",
    )
    assert killed.code == -signal.SIGKILL, killed.err
    assert len(ledger.charges()) == 1

    # Another process resumes it: the charge halts, and its declared reconciler finds it in the
    # ledger by its key, settles it and completes the run, charging nothing more.
    finished = child("resume", "r", PAYMENTS_LEDGER=ledger_file, BIDE_DB=pg_url)
    assert (finished.code, finished.out) == (
        0,
        "Charged ann 12.00 for the May invoice on her card on file.\n",
    ), finished.err
    assert len(ledger.charges()) == 1
    shown = child("show", "--db", pg_url, "r", "--json").json()
    (resolved,) = [e for e in shown["events"] if e["kind"] == "result" and e["call_id"] == "c3"]
    assert resolved["payload"]["resolved"]["by"] == "reconciler find_charge"
    again = child("resolve", "--db", pg_url, "r", "c3", "--not-executed")
    assert again.code == 2  # settled: a different resolution is refused
    listed = child("list", "--json", BIDE_DB=pg_url).json()["runs"]
    assert [(r["run_id"], r["status"]) for r in listed] == [("r", "completed")]


def test_a_run_killed_after_a_turn_was_recorded_resumes_to_completion(pg_url: str) -> None:
    killed = child(
        "run",
        "--db",
        pg_url,
        "--agent",
        "tests.cli.agents:agent",
        "--run-id",
        "r",
        "go",
        BIDE_CRASH="turn.after_record@1",
    )
    assert killed.code == -signal.SIGKILL
    # As on SQLite (tests/cli/test_drive.py): not ended, and no live lease.
    assert child("list", "--db", pg_url, "--json").json()["runs"][0]["status"] == "orphaned"
    resumed = child("resume", "--db", pg_url, "r")
    assert (resumed.code, resumed.out) == (0, "all done\n"), resumed.err
    events = [e["event"] for e in resumed.events()][:3]
    assert events == ["lease_taken_over", "run_resumed", "tool_started"]
    shown = child("show", "--db", pg_url, "r", "--json")
    assert shown.code == 0 and shown.json()["status"] == "completed", shown.out


def test_a_command_on_a_database_without_the_schema_says_how_to_create_it(pg_empty: str) -> None:
    done = child("list", "--db", pg_empty)
    assert done.code == 2
    assert "has no bide schema" in done.error_line and "migrate" in done.error_line
