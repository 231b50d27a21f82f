"""``run`` and ``resume``: answer on stdout, progress on stderr, exit codes, JSON, crashes."""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import signal
from pathlib import Path

from examples.payments import PaymentsLedger
from runtime import RunResult, RunStatus, Waiting
from runtime.cli import drive
from runtime.cli.base import Invocation, exit_code
from runtime.cli.logs import configured
from tests.cli.invoke import Cli, child

RESULT_KEYS = {"run_id", "status", "output", "halts", "waiting", "usage", "turns", "error"}


def test_run_prints_the_answer_on_stdout_and_progress_lines_on_stderr(
    cli: Cli, db_path: Path
) -> None:
    done = cli("run", "--db", str(db_path), "--agent", "tests.cli.agents:agent", "go")
    assert (done.code, done.out) == (0, "all done\n")
    names = [e["event"] for e in done.events()]
    # A READ_ONLY call runs before its turn is journaled: the turn commits with its result.
    assert names == [
        "run_started",
        "tool_started",
        "turn_recorded",
        "tool_finished",
        "turn_recorded",
        "drive_finished",
    ]
    assert done.event("tool_started")["message"] == "lookup started [read_only] call c1"
    assert {e["run_id"] for e in done.events()} == {done.event("run_started")["run_id"]}


def test_run_without_a_run_id_makes_one_and_says_which(cli: Cli, db_path: Path) -> None:
    done = cli("run", "--db", str(db_path), "--agent", "tests.cli.agents:agent", "go")
    run_id = done.event("run_started")["run_id"]
    assert re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{6}", run_id)
    listed = cli("list", "--db", str(db_path), "--json").json()
    assert [r["run_id"] for r in listed["runs"]] == [run_id]


def test_run_json_prints_the_run_result_shape(cli: Cli, db_path: Path) -> None:
    done = cli(
        "run",
        "--db",
        str(db_path),
        "--agent",
        "tests.cli.agents:agent",
        "--run-id",
        "r",
        "--json",
        "go",
    )
    result = done.json()
    assert done.code == 0 and set(result) == RESULT_KEYS
    assert (result["run_id"], result["status"], result["output"], result["turns"]) == (
        "r",
        "completed",
        "all done",
        2,
    )


def test_run_reads_its_input_from_stdin_given_a_dash(db_path: Path) -> None:
    done = child(
        "run",
        "--db",
        str(db_path),
        "--agent",
        "tests.cli.agents:agent",
        "--run-id",
        "r",
        "-",
        stdin="from stdin\n",
    )
    assert done.code == 0, done.err
    shown = child("show", "--db", str(db_path), "r", "--json").json()
    assert shown["input"] == "from stdin"


def test_a_failed_run_exits_1_and_says_why(cli: Cli, db_path: Path) -> None:
    done = cli(
        "run", "--db", str(db_path), "--agent", "tests.cli.agents:model_rejects", "--json", "go"
    )
    assert done.code == 1
    assert done.json()["status"] == "failed"
    assert done.event("run_failed")["message"] == "failed: model error: 503 overloaded"


def test_max_turns_is_exit_1_with_one_line_saying_how_to_continue(cli: Cli, db_path: Path) -> None:
    db = str(db_path)
    done = cli(
        "run", "--db", db, "--agent", "tests.cli.agents:one_turn_budget", "--run-id", "r", "go"
    )
    assert done.code == 1
    assert done.error_line == (
        "bide: error: run 'r' reached max_turns=1. Nothing is "
        f"lost: raise max_turns in tests.cli.agents:one_turn_budget, then `bide resume --db {db} r`"
    )
    assert done.err.count("bide: error") == 1 and "Traceback" not in done.err


def test_a_model_unavailable_after_retries_is_exit_1_with_how_to_continue(
    cli: Cli, db_path: Path
) -> None:
    db = str(db_path)
    done = cli(
        "run", "--db", db, "--agent", "tests.cli.agents:model_unavailable", "--run-id", "r", "go"
    )
    assert done.code == 1
    assert done.error_line == (
        "bide: error: the model is unavailable after retries (503 overloaded). Nothing is lost: "
        f"continue later with `bide resume --db {db} r`"
    )
    assert [e["event"] for e in done.events()].count("model_retry") == 1


def test_an_error_with_json_also_prints_a_json_error_on_stdout(cli: Cli, db_path: Path) -> None:
    done = cli(
        "run", "--db", str(db_path), "--agent", "tests.cli.agents:one_turn_budget", "--json", "go"
    )
    error = done.json()["error"]
    assert (error["type"], error["exit_code"]) == ("BudgetError", 1)
    assert error["message"] in done.error_line


def test_running_an_existing_run_with_another_input_is_exit_2(cli: Cli, db_path: Path) -> None:
    db = str(db_path)
    assert (
        cli("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "r", "a").code == 0
    )
    done = cli("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "r", "b")
    assert done.code == 2 and "exists with a different input" in done.error_line


def test_resume_of_a_finished_run_prints_its_recorded_answer(cli: Cli, db_path: Path) -> None:
    db = str(db_path)
    cli("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "r", "go")
    again = cli("resume", "--db", db, "r")
    assert (again.code, again.out) == (0, "all done\n")
    assert not [e for e in again.events() if e["event"].startswith("tool_")]


def test_resume_of_an_unknown_run_is_exit_2(cli: Cli, db_path: Path) -> None:
    cli("migrate", "--db", str(db_path))
    done = cli("resume", "--db", str(db_path), "ghost")
    assert done.code == 2 and done.error_line.startswith("bide: error: no run 'ghost' in ")


def test_a_halted_run_exits_4_and_names_the_call_and_how_to_resolve_it(
    cli: Cli, db_path: Path
) -> None:
    db = str(db_path)
    done = cli(
        "run", "--db", db, "--agent", "tests.cli.agents:halting", "--run-id", "r", "--json", "go"
    )
    assert done.code == 4
    (halt,) = done.json()["halts"]
    assert (halt["call_id"], halt["tool"]) == ("c1", "charge")
    assert done.event("run_halted")["message"] == (
        f"halted on c1 charge: find out whether it acted, then `bide resolve --db {db} r c1 "
        f"--succeeded JSON | --failed TEXT | --not-executed`, then `bide resume --db {db} r`"
    )


def test_a_run_killed_after_its_charge_is_settled_by_its_reconciler_and_charges_once(
    tmp_path: Path,
) -> None:
    """The guarantee through the CLI: SIGKILL between the charge and its journal record."""
    db, ledger_file = str(tmp_path / "bide.db"), str(tmp_path / "ledger.db")
    ledger = PaymentsLedger(ledger_file)
    spec = "examples.payments:make_agent"
    killed = child(
        "run",
        "--db",
        db,
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

    # The charge halts, and its declared reconciler finds it in the ledger by its key: the
    # resume settles it and completes, charging nothing more.
    finished = child("resume", "--db", db, "r", PAYMENTS_LEDGER=ledger_file)
    assert (finished.code, finished.out) == (
        0,
        "Charged ann 12.00 for the May invoice on her card on file.\n",
    ), finished.err
    assert len(ledger.charges()) == 1
    shown = child("show", "--db", db, "r", "--json").json()
    (resolved,) = [e for e in shown["events"] if e["kind"] == "result" and e["call_id"] == "c3"]
    assert resolved["payload"]["resolved"]["by"] == "reconciler find_charge"
    again = child("resolve", "--db", db, "r", "c3", "--not-executed")
    assert again.code == 2  # settled: a different resolution is refused


def test_a_run_killed_inside_its_first_call_resumes_to_completion(db_path: Path) -> None:
    db = str(db_path)
    killed = child(
        "run",
        "--db",
        db,
        "--agent",
        "tests.cli.agents:agent",
        "--run-id",
        "r",
        "go",
        # The lookup is READ_ONLY: it ran, and its turn was to commit with its result.
        BIDE_CRASH="tool.after_call@1",
        # A lease that outlives a slow machine's next commands: the resume takes it over because
        # its holder is gone, not because it expired.
        BIDE_LEASE_TTL="600",
    )
    assert killed.code == -signal.SIGKILL
    assert child("list", "--db", db, "--json").json()["runs"][0]["status"] == "orphaned"
    resumed = child("resume", "--db", db, "r")
    assert (resumed.code, resumed.out) == (0, "all done\n"), resumed.err
    events = [e["event"] for e in resumed.events()][:3]
    assert events == ["lease_taken_over", "run_resumed", "tool_started"]


def test_a_waiting_result_exits_3_and_says_what_it_waits_for() -> None:
    """Pinned on the report itself until the approval gate lets a drive stop waiting."""
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(json=False)
    invocation = Invocation(args, prog="bide", environ={}, stdout=out)
    result = RunResult(
        run_id="r",
        status=RunStatus.WAITING,
        waiting=(
            Waiting("approval", "c1", "charge", {}),
            Waiting("input", "c2", "ask", {}, prompt="How much?", key="amount"),
        ),
    )
    with configured(level=logging.INFO, fmt="json", stream=err):
        drive._report(invocation, result)
    assert exit_code(result.status) == 3
    lines = [json.loads(line) for line in err.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["waiting_for", "waiting_for"]
    messages = [line["message"] for line in lines]
    assert messages == [
        "waiting for approval of c1 charge",
        'waiting for an answer for c2 ask: "How much?"',
    ]
    assert out.getvalue() == ""


def test_resume_with_an_agent_of_another_name_says_so(cli: Cli, db_path: Path) -> None:
    """--agent may drive a run with another agent than the one that started it (a fixed build,
    another budget), but never without a word: one line names both."""
    db = str(db_path)
    started = cli("run", "--db", db, "--agent", "tests.cli.agents:halting", "--run-id", "r", "go")
    assert started.code == 4, started.err
    other = cli("resume", "--db", db, "r", "--agent", "tests.cli.agents:agent")
    assert "run r was started by agent halting; resuming it with agent plain (--agent)" in (
        other.err
    )
    same = cli("resume", "--db", db, "r", "--agent", "tests.cli.agents:halting")
    assert same.code == 4, same.err
    assert "resuming it with agent" not in same.err


def test_a_typed_output_is_json_in_run_show_and_resume(cli: Cli, db_path: Path) -> None:
    db = ("--db", str(db_path))
    done = cli("run", *db, "--agent", "tests.cli.typed_agents:typed", "--run-id", "t", "quote ann")
    assert (done.code, json.loads(done.out)) == (0, {"customer": "ann", "cents": 1200})
    answer = cli(
        "run",
        *db,
        "--agent",
        "tests.cli.typed_agents:typed",
        "--run-id",
        "t",
        "--json",
        "quote ann",
    )
    assert answer.json()["output"] == {"customer": "ann", "cents": 1200}
    shown = cli("show", *db, "t", "--json").json()
    assert (shown["status"], shown["output"]) == ("completed", {"customer": "ann", "cents": 1200})
    text = cli("show", *db, "t").out
    assert 'completed: {"customer": "ann", "cents": 1200}' in text
    resumed = cli("resume", *db, "t", "--json").json()
    assert resumed["output"] == {"customer": "ann", "cents": 1200}


def test_usage_shows_in_list_which_filters_runs_over_a_token_threshold(
    cli: Cli, db_path: Path
) -> None:
    db = ("--db", str(db_path))
    assert cli("run", *db, "--agent", "tests.cli.agents:agent", "--run-id", "cheap", "go").code == 0
    assert (
        cli("run", *db, "--agent", "tests.cli.agents:spender", "--run-id", "dear", "go").code == 0
    )
    over = cli("list", *db, "--tokens-over", "500", "--json").json()["runs"]
    assert [(r["run_id"], r["usage"]) for r in over] == [
        ("dear", {"input_tokens": 700, "output_tokens": 50})
    ]
    header, *rows = cli("list", *db).out.splitlines()
    assert header.split()[5] == "TOKENS"  # after RUN ID, STATUS, AGENT, TURNS
    assert {row.split()[0]: row.split()[4] for row in rows} == {"cheap": "0", "dear": "750"}
    assert "tokens 700 in / 50 out" in cli("show", *db, "dear").out


def test_a_run_over_a_usage_limit_fails_naming_the_limit(cli: Cli, db_path: Path) -> None:
    done = cli("run", "--db", str(db_path), "--agent", "tests.cli.agents:limited", "--json", "go")
    assert done.code == 1
    result = done.json()
    assert result["status"] == "failed"
    assert result["error"] == (
        "usage limit requests=1 reached: 1 model requests made, the next would exceed it"
    )
