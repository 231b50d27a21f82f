"""``run --session``, ``sessions`` and ``show`` for a session's messages."""

from __future__ import annotations

from pathlib import Path

from tests.cli.invoke import Cli


def test_a_session_of_two_messages_listed_and_shown(cli: Cli, db_path: Path) -> None:
    db = ("--db", str(db_path))
    chatty = ("--agent", "tests.cli.agents:chatty", "--session", "t-1")
    first = cli("run", *db, *chatty, "--run-id", "m1", "who is ann?")
    second = cli("run", *db, *chatty, "--run-id", "m2", "and bob?")
    assert (first.code, first.out, second.code, second.out) == (
        0,
        "ann is on pro\n",
        0,
        "bob is on pro too\n",
    )
    listed = cli("sessions", *db, "--json").json()
    assert listed == {
        "sessions": [{"session": "t-1", "messages": 2, "last_run": "m2", "status": "completed"}]
    }
    runs = cli("sessions", *db, "t-1", "--json").json()["runs"]
    assert [(r["k"], r["run_id"], r["status"], r["turns"]) for r in runs] == [
        (1, "m1", "completed", 2),
        (2, "m2", "completed", 2),
    ]
    assert cli("sessions", *db).out.splitlines()[1].split() == ["t-1", "2", "m2", "completed"]
    assert "session t-1 message 2" in cli("show", *db, "m2").out
    shown = cli("show", *db, "m2", "--json").json()
    assert (shown["session"]["id"], shown["session"]["after"]) == ("t-1", ["m1"])
    shown_journal = cli("show", *db, "session:t-1")
    assert shown_journal.code == 2 and "sessions --db" in shown_journal.err
    # The session's own journal is no run: list shows the two messages only.
    assert [r["run_id"] for r in cli("list", *db, "--json").json()["runs"]] == ["m2", "m1"]


def test_a_message_while_the_last_one_is_halted_is_refused(cli: Cli, db_path: Path) -> None:
    db = ("--db", str(db_path))
    halted = cli(
        "run", *db, "--agent", "tests.cli.agents:halting", "--session", "s", "--run-id", "h", "x"
    )
    assert halted.code == 4
    busy = cli(
        "run", *db, "--agent", "tests.cli.agents:agent", "--session", "s", "--run-id", "n", "y"
    )
    assert busy.code == 6
    assert "session 's' is busy" in busy.err and "('h')" in busy.err
    assert cli("sessions", *db, "s", "--json").json()["runs"] == [
        {
            "k": 1,
            "run_id": "h",
            "status": "halted",
            "turns": 1,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    ]
    assert cli("sessions", *db, "nope").code == 2
