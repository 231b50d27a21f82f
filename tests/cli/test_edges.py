"""The CLI's edges: a closed stdout, a quiet run's id, what the log lines say, keygen's files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.invoke import Cli, child
from tests.conftest import child_env


def test_show_json_into_a_pipe_nobody_reads_exits_141_with_nothing_on_stderr(
    cli: Cli, db_path: Path
) -> None:
    assert (
        cli(
            "--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:agent", "go"
        ).code
        == 0
    )
    read, write = os.pipe()
    os.close(read)  # `| head` that already quit: every write gets EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runtime", "show", "--json", "--db", str(db_path), "r"],
            env=child_env(),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_run_q_without_a_run_id_still_names_the_id_it_made_up(cli: Cli, db_path: Path) -> None:
    done = cli("-q", "--db", str(db_path), "run", "--agent", "tests.cli.agents:agent", "go")
    assert done.code == 0 and done.out == "all done\n"
    (line,) = done.err.splitlines()
    assert line.startswith("bide: run id run-")
    run_id = line.removeprefix("bide: run id ")
    listed = cli("--db", str(db_path), "list", "--json").json()["runs"]
    assert [r["run_id"] for r in listed] == [run_id]


def test_a_denial_is_logged_as_the_persons_deny_not_as_the_gates_outcome(
    cli: Cli, db_path: Path
) -> None:
    started = cli(
        "--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:gated", "go"
    )
    assert started.code == 3, started.err
    denied = cli("--db", str(db_path), "approve", "r", "c1", "--deny", "--by", "bob")
    assert denied.code == 0, denied.err
    event = denied.event("decision_recorded")
    assert (event["decision"], event["counts"]) == ("deny", True)
    assert event["message"].startswith("bob's decision on call c1 recorded: deny, counted")


def test_a_late_approval_is_logged_as_approve_not_counted(cli: Cli, db_path: Path) -> None:
    cli("--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:gated", "go")
    cli("--db", str(db_path), "approve", "r", "c1", "--by", "alice")
    again = cli("--db", str(db_path), "approve", "r", "c1", "--by", "alice")
    message = again.event("decision_recorded")["message"]
    assert message.startswith("alice's decision on call c1 recorded: approve, not counted")


def test_the_console_line_of_a_decision_says_the_decision_once(db_path: Path) -> None:
    db = str(db_path)
    assert (
        child("--db", db, "run", "--run-id", "r", "--agent", "tests.cli.agents:gated", "go").code
        == 3
    )
    done = child(
        "--log-format", "console", "--db", db, "approve", "r", "c1", "--deny", "--by", "bob"
    )
    assert done.code == 0, done.err
    (line,) = [x for x in done.err.splitlines() if "decision" in x]
    assert "bob's decision on call c1 recorded: deny, counted; the gate: denied" in line
    assert "approve=" not in line and "counts=" not in line


def test_resolve_logs_succeeded_as_its_output_says(cli: Cli, db_path: Path) -> None:
    halted = cli(
        "--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:halting", "go"
    )
    assert halted.code == 4, halted.err
    done = cli("--db", str(db_path), "resolve", "r", "c1", "--succeeded", '{"charged": 5}')
    assert done.out.splitlines()[0] == "resolved call c1 of run r: succeeded"
    assert done.event("call_resolved")["message"] == "call c1 resolved: succeeded"


def test_keygen_refuses_an_existing_pub_file_and_leaves_both_names_alone(tmp_path: Path) -> None:
    out = tmp_path / "k.pem"
    Path(f"{out}.pub").write_text("someone else's key\n")
    done = child("keygen", "--out", str(out))
    assert done.code == 2
    assert done.error_line == (
        f"bide: error: {out}.pub exists; keygen never overwrites a key (--force replaces it)"
    )
    assert not out.exists() and Path(f"{out}.pub").read_text() == "someone else's key\n"


def test_keygen_never_writes_through_a_symlink_even_with_force(tmp_path: Path) -> None:
    target = tmp_path / "authorized"
    target.write_text("precious\n")
    out = tmp_path / "k.pem"
    Path(f"{out}.pub").symlink_to(target)
    refused = child("keygen", "--out", str(out))
    assert refused.code == 2 and f"{out}.pub is a symlink" in refused.error_line
    assert target.read_text() == "precious\n"
    forced = child("keygen", "--out", str(out), "--force")
    assert forced.code == 0, forced.err
    assert target.read_text() == "precious\n"
    assert not Path(f"{out}.pub").is_symlink()
    assert Path(f"{out}.pub").read_text().strip() == forced.out.splitlines()[-1]


def test_keygen_force_replaces_an_existing_pair(tmp_path: Path) -> None:
    out = tmp_path / "k.pem"
    first = child("keygen", "--out", str(out))
    again = child("keygen", "--out", str(out), "--force")
    assert (first.code, again.code) == (0, 0)
    assert first.out.splitlines()[-1] != again.out.splitlines()[-1]
    assert Path(f"{out}.pub").read_text().strip() == again.out.splitlines()[-1]
