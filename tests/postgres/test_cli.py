"""The CLI on a PostgreSQL journal: ``--db postgresql://...`` and ``$BIDE_DB`` alike, and a run
started by one process resumed, resolved and finished by others."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from examples.payments import PaymentsLedger
from tests.cli.invoke import child
from tests.conftest import ROOT, child_env

DOC_URL = "postgresql://bide@db.internal/bide"
"""The database docs/cli.md names; the test puts its own in its place."""


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


def test_a_run_killed_inside_its_first_call_resumes_to_completion(pg_url: str) -> None:
    killed = child(
        "run",
        "--db",
        pg_url,
        "--agent",
        "tests.cli.agents:agent",
        "--run-id",
        "r",
        "go",
        # The lookup is READ_ONLY: it ran, and its turn was to commit with its result.
        BIDE_CRASH="tool.after_call@1",
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


def doc_commands() -> list[str]:
    """The commands of docs/cli.md's PostgreSQL section, in order (``export`` lines included)."""
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = doc.split("## A journal on PostgreSQL", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_postgresql_section_of_the_cli_doc_runs_each_command_in_a_process_of_its_own(
    pg_url: str, tmp_path: Path
) -> None:
    """The run is started (and killed after its charge) by one process, and resumed by another
    that has only the database: one charge, and the run completed."""
    commands = doc_commands()
    assert any(c.startswith("python -m runtime resume inv-7 --db ") for c in commands)
    exports: list[str] = []
    codes = []
    for command in commands:
        line = command.replace(DOC_URL, pg_url).replace(
            "python ", f"{shlex.quote(sys.executable)} ", 1
        )
        line = line.replace("=python ", f"={shlex.quote(sys.executable)} ")
        if line.startswith("export "):
            exports.append(line)
            continue
        script = "\n".join([*exports, line])
        env = child_env()
        env.pop("BIDE_DB", None)
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        codes.append(done.returncode)
        if "BIDE_CRASH=" in line:
            # bash runs a script's last command in its own place: killed, or said killed.
            assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), done.stderr
        else:
            assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert len(codes) == 5
    assert len(PaymentsLedger(str(tmp_path / "payments-ledger.db")).charges()) == 1
    shown = child("show", "--db", pg_url, "inv-7", "--json").json()
    assert shown["status"] == "completed"


def test_the_demo_runs_on_a_postgresql_database_and_never_prints_its_password(
    pg_url: str,
) -> None:
    secret = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@", 1)
    assert secret != pg_url  # (the test server trusts; the password is only there to be hidden)
    done = child("demo", "--db", secret)
    assert done.code == 0, done.out + done.err
    assert "The ledger: 1 charge." in done.out
    assert "call c3 settled by reconciler find_charge: it said found" in done.out
    assert "s3cret" not in done.out + done.err
    assert "postgres:***@" in done.out
    runs = child("list", "--db", pg_url, "--json").json()["runs"]
    assert [(r["run_id"][:5], r["status"]) for r in runs] == [("demo-", "completed")]
