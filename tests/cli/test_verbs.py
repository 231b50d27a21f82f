"""``resolve`` and ``cancel``: journaled with who and why; refusals are one line and exit 2."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest

from tests.cli.agents import SENT
from tests.cli.invoke import Cli, child


@pytest.fixture
def halted(cli: Cli, db_path: Path) -> str:
    """A run halted on call c1 (a charge whose outcome is unknown)."""
    done = cli(
        "run", "--db", str(db_path), "--agent", "tests.cli.agents:halting", "--run-id", "r", "go"
    )
    assert done.code == 4, done.err
    return str(db_path)


def test_resolve_succeeded_records_who_and_evidence_and_resume_finishes(
    cli: Cli, halted: str
) -> None:
    done = cli(
        "resolve", "--db", halted, "r", "c1", "--succeeded", '{"charged": 5}',
        "--by", "alice", "--evidence", "bank statement line 7",
    )  # fmt: skip
    assert done.code == 0, done.err
    assert done.out.splitlines() == [
        "resolved call c1 of run r: succeeded",
        f"continue the run: bide resume --db {halted} r",
    ]
    result = cli("show", "--db", halted, "r", "--json").json()["events"][-1]
    assert result["payload"]["value"] == {"charged": 5}
    assert result["payload"]["resolved"] == {"by": "alice", "evidence": "bank statement line 7"}
    finished = cli("resume", "--db", halted, "r")
    assert (finished.code, finished.out) == (0, "all done\n")


def test_resolve_names_the_login_as_who_when_by_is_not_given(cli: Cli, halted: str) -> None:
    assert cli("resolve", "--db", halted, "r", "c1", "--failed", "declined").code == 0
    payload = cli("show", "--db", halted, "r", "--json").json()["events"][-1]["payload"]
    assert payload["resolved"]["by"] == getpass.getuser()
    assert payload["error"]["message"] == "declined"


def test_the_same_resolution_again_changes_nothing_and_a_different_one_is_refused(
    cli: Cli, halted: str
) -> None:
    first = cli("resolve", "--db", halted, "r", "c1", "--failed", "declined")
    same = cli("resolve", "--db", halted, "r", "c1", "--failed", "declined")
    assert (first.code, same.code) == (0, 0)
    assert same.out.splitlines()[0] == "call c1 of run r was already resolved failed"
    other = cli("resolve", "--db", halted, "r", "c1", "--succeeded", "1")
    assert other.code == 2
    assert other.error_line == (
        "bide: error: call 'c1' of run 'r' was resolved already (error, attempt 1); a different "
        "resolution is refused"
    )
    assert "Traceback" not in other.err


@pytest.mark.parametrize(
    ("first", "then"), [("1.0", "true"), ("1", "1.0"), ('{"a": [0]}', '{"a": [false]}')]
)
def test_a_value_equal_in_python_but_not_in_json_is_a_different_resolution(
    cli: Cli, halted: str, first: str, then: str
) -> None:
    assert cli("resolve", "--db", halted, "r", "c1", "--succeeded", first).code == 0
    other = cli("resolve", "--db", halted, "r", "c1", "--succeeded", then)
    assert other.code == 2, other.out
    assert "a different resolution is refused" in other.error_line
    same = cli("resolve", "--db", halted, "r", "c1", "--succeeded", first)
    assert same.code == 0 and "already resolved" in same.out


def test_resolving_a_call_that_is_not_halted_is_refused(cli: Cli, db_path: Path) -> None:
    db = str(db_path)
    cli("run", "--db", db, "--agent", "tests.cli.agents:agent", "--run-id", "r", "go")
    done = cli("resolve", "--db", db, "r", "c1", "--not-executed")
    assert done.code == 2
    assert "bide: error: call 'c1' of run 'r' has a result already" in done.error_line
    unknown = cli("resolve", "--db", db, "r", "c9", "--not-executed")
    assert (unknown.code, unknown.error_line) == (
        2,
        "bide: error: run 'r' has no call 'c9'",
    )


def test_not_executed_lets_the_next_resume_attempt_the_call_again(cli: Cli, halted: str) -> None:
    assert cli("resolve", "--db", halted, "r", "c1", "--not-executed").code == 0
    again = cli("resume", "--db", halted, "r", "--json")
    assert again.code == 4  # attempt 2 was made, and its outcome is unknown again
    events = cli("show", "--db", halted, "r", "--json").json()["events"]
    assert [e["key"] for e in events if e["kind"] == "attempt"] == [
        "attempt/c1/1",
        "attempt/c1/2",
    ]


def test_not_executed_typed_again_after_the_next_attempt_started_is_refused_naming_it(
    cli: Cli, halted: str
) -> None:
    """The same `resolve` typed again (a retry, a script) once attempt 2 was sent and halted is
    not taken for a verdict on attempt 2: nothing is recorded and nothing is charged again."""
    SENT.clear()
    assert cli("resolve", "--db", halted, "r", "c1", "--not-executed").code == 0
    same = cli("resolve", "--db", halted, "r", "c1", "--not-executed")
    assert (same.code, same.out.splitlines()[0]) == (
        0,
        "call c1 of run r was already resolved not executed",
    )
    assert cli("resume", "--db", halted, "r").code == 4  # attempt 2 was sent and halted
    assert len(SENT) == 1
    before = cli("show", "--db", halted, "r", "--json").json()["events"]

    again = cli("resolve", "--db", halted, "r", "c1", "--not-executed")
    assert (again.code, again.error_line) == (
        2,
        "bide: error: call 'c1' of run 'r' has had 2 attempts and is on attempt 2: name the "
        "attempt this resolution judged (--attempt 2 if it is the current one)",
    )
    named = cli("resolve", "--db", halted, "r", "c1", "--attempt", "1", "--not-executed")
    assert (named.code, named.error_line) == (
        2,
        "bide: error: call 'c1' of run 'r': attempt 1 was resolved as not executed already and "
        "the call is on attempt 2 now (which has no result); a resolution of attempt 1 is "
        "refused",
    )
    assert cli("show", "--db", halted, "r", "--json").json()["events"] == before
    assert cli("resume", "--db", halted, "r").code == 4  # still halted on attempt 2
    assert len(SENT) == 1, "a refused resolution let the charge be sent again"

    shown = cli("show", "--db", halted, "r")
    assert "(attempt 2) and has no result" in shown.out
    assert f"resolve it: bide resolve --db {halted} r c1 --attempt 2 --succeeded JSON" in shown.out
    done = cli("resolve", "--db", halted, "r", "c1", "--attempt", "2", "--failed", "declined")
    assert (done.code, done.out.splitlines()[0]) == (
        0,
        "resolved call c1 attempt 2 of run r: failed",
    )
    result = cli("show", "--db", halted, "r", "--json").json()["events"][-1]
    assert (result["key"], result["payload"]["attempt"]) == ("result/c1/2", 2)


def test_an_attempt_the_call_never_made_is_refused(cli: Cli, halted: str) -> None:
    done = cli("resolve", "--db", halted, "r", "c1", "--attempt", "2", "--not-executed")
    assert (done.code, done.error_line) == (
        2,
        "bide: error: call 'c1' of run 'r' has no attempt 2: it is on attempt 1 (which has no "
        "result)",
    )
    zero = cli("resolve", "--db", halted, "r", "c1", "--attempt", "0", "--not-executed")
    assert zero.code == 2 and "an attempt is a positive integer" in zero.error_line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--succeeded", "{not json"], "--succeeded takes the call's result as JSON"),
        (["--succeeded", "[" * 5000 + "]" * 5000], "--succeeded: JSON nested more than 100"),
        (["--succeeded", '{"a":' * 5000 + "1" + "}" * 5000], "nested more than 100 levels"),
        (["--failed", "  "], "--failed needs a text"),
        ([], "one of the arguments --succeeded --failed --not-executed is required"),
        (["--failed", "x", "--not-executed"], "not allowed with argument"),
    ],
)
def test_a_malformed_resolve_is_a_usage_error(
    cli: Cli, halted: str, argv: list[str], says: str
) -> None:
    done = cli("resolve", "--db", halted, "r", "c1", *argv)
    assert done.code == 2
    assert done.error_line.startswith("bide: error: ") and says in done.error_line
    assert len(done.error_line) < 300


def test_cancel_stops_the_run_at_its_next_drive_which_exits_5(cli: Cli, halted: str) -> None:
    done = cli("cancel", "--db", halted, "r", "--reason", "customer withdrew", "--by", "carol")
    assert done.code == 0
    assert done.out.startswith("cancel requested for run r")
    assert done.out.splitlines()[1] == (
        f"note: c1 charge was attempted and has no result, and stays unknown: record what "
        f"happened with `bide resolve --db {halted} r c1 --succeeded JSON | --failed TEXT | "
        "--not-executed`"
    )
    again = cli("cancel", "--db", halted, "r")
    assert (again.code, again.out.splitlines()[0]) == (0, "cancel was already requested for run r")
    assert cli("list", "--db", halted, "--json").json()["runs"][0]["status"] == "cancelled"
    resumed = cli("resume", "--db", halted, "r", "--json")
    assert (resumed.code, resumed.json()["status"]) == (5, "cancelled")
    ended = cli("cancel", "--db", halted, "r")
    assert (ended.code, ended.error_line) == (
        2,
        "bide: error: run 'r' already ended (cancelled)",
    )


def test_resolve_and_cancel_in_a_child_process(cli: Cli, halted: str) -> None:
    resolved = child("resolve", "--db", halted, "r", "c1", "--succeeded", json.dumps("ok"))
    assert resolved.code == 0, resolved.err
    refused = child("resolve", "--db", halted, "r", "c1", "--not-executed")
    assert refused.code == 2 and refused.error_line.startswith("bide: error: call 'c1'")
    assert child("cancel", "--db", halted, "r").code == 0
    assert child("cancel", "--db", halted, "ghost").code == 2


def test_a_call_halted_in_a_cancelled_run_can_still_be_resolved(cli: Cli, halted: str) -> None:
    cli("cancel", "--db", halted, "r")
    assert cli("resume", "--db", halted, "r").code == 5
    done = cli("resolve", "--db", halted, "r", "c1", "--not-executed", "--evidence", "no charge")
    assert done.code == 0, done.err
    assert cli("show", "--db", halted, "r", "--json").json()["status"] == "cancelled"
