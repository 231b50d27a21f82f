"""approve, answer and keygen, as an operator runs them; list and show of waiting runs."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.cli.invoke import Cli, child


def start(cli: Cli, db: Path, spec: str) -> None:
    done = cli("--db", str(db), "run", "--run-id", "r", "--agent", spec, "go")
    assert done.code == 3, done.err


def test_a_single_approval_opens_the_gate_and_resume_completes(cli: Cli, db_path: Path) -> None:
    start(cli, db_path, "tests.cli.agents:gated")
    listed = cli("--db", str(db_path), "list")
    assert "waiting" in listed.out and "approval c1 wire (0/1)" in listed.out
    shown = cli("--db", str(db_path), "show", "r")
    assert "needs an approval (0 of 1: none yet)" in shown.out
    approved = cli("--db", str(db_path), "approve", "r", "c1", "--by", "alice")
    assert approved.code == 0, approved.err
    assert "counted" in approved.out and "tally: approved, 1 of 1" in approved.out
    assert cli("--db", str(db_path), "resume", "r").code == 0


def test_a_denial_is_final_and_the_run_completes_without_the_tool(cli: Cli, db_path: Path) -> None:
    start(cli, db_path, "tests.cli.agents:gated")
    denied = cli("--db", str(db_path), "approve", "r", "c1", "--deny", "--by", "bob")
    assert "tally: denied" in denied.out
    assert cli("--db", str(db_path), "resume", "r").code == 0
    shown = cli("--db", str(db_path), "show", "--json", "r").json()
    result = [e for e in shown["events"] if e["kind"] == "result"]
    assert result[-1]["payload"]["error"]["type"] == "approval_denied"


def test_signed_two_of_three_through_keygen_and_approve(tmp_path: Path, db_path: Path) -> None:
    keys = {}
    for name in ("alice", "bob", "carol"):
        made = child("keygen", "--out", str(tmp_path / f"{name}.pem"))
        assert made.code == 0, made.err
        keys[name] = tmp_path / f"{name}.pem"
        assert stat.S_IMODE(keys[name].stat().st_mode) == 0o600
    env = {
        "BIDE_TEST_APPROVERS": ",".join(f"{n}={p}.pub" for n, p in keys.items()),
    }
    db = str(db_path)
    first = child(
        "--db", db, "run", "--run-id", "r", "--agent", "tests.cli.agents:signed_gate", "go", **env
    )
    assert first.code == 3, first.err
    # Carol signs with Bob's key: journaled as seen, not counted.
    forged = child(
        "--db", db, "approve", "r", "c1", "--approver", "carol", "--key", str(keys["bob"]), **env
    )
    assert forged.code == 0 and "not counted" in forged.out
    again = child(
        "--db", db, "approve", "r", "c1", "--approver", "alice", "--key", str(keys["alice"]), **env
    )
    assert "counted" in again.out and "1 of 2" in again.out
    assert child("--db", db, "resume", "r", **env).code == 3
    done = child(
        "--db", db, "approve", "r", "c1", "--approver", "bob", "--key", str(keys["bob"]), **env
    )
    assert "tally: approved, 2 of 2" in done.out
    assert child("--db", db, "resume", "r", **env).code == 0


def test_an_unsigned_approval_of_a_signed_gate_is_refused(tmp_path: Path, db_path: Path) -> None:
    made = child("keygen", "--out", str(tmp_path / "a.pem"))
    assert made.code == 0
    env = {"BIDE_TEST_APPROVERS": f"alice={tmp_path / 'a.pem'}.pub,bob={tmp_path / 'a.pem'}.pub"}
    # Two approvers sharing one key is refused when the agent is built.
    refused = child(
        "--db", str(db_path), "run", "--agent", "tests.cli.agents:signed_gate", "go", **env
    )
    assert refused.code == 2 and "share one key" in refused.error_line


def test_answer_validates_the_value_then_resume_completes(cli: Cli, db_path: Path) -> None:
    start(cli, db_path, "tests.cli.agents:asking")
    listed = cli("--db", str(db_path), "list")
    assert "input c1 quote (price)" in listed.out
    wrong = cli("--db", str(db_path), "answer", "r", "price", "--value", '"cheap"')
    assert wrong.code == 2 and "does not fit" in wrong.error_line
    not_json = cli("--db", str(db_path), "answer", "r", "price", "--value", "cheap")
    assert not_json.code == 2 and "--value takes JSON" in not_json.error_line
    deep = cli("--db", str(db_path), "answer", "r", "price", "--value", "[" * 5000 + "]" * 5000)
    assert deep.code == 2 and "--value: JSON nested more than 100 levels deep" in deep.error_line
    assert len(deep.error_line) < 300
    ok = cli("--db", str(db_path), "answer", "r", "price", "--value", "42")
    assert ok.code == 0 and "answer to price recorded" in ok.out
    assert cli("--db", str(db_path), "resume", "r").code == 0


def test_keygen_never_overwrites_a_key(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    assert child("keygen", "--out", str(path)).code == 0
    before = path.read_bytes()
    again = child("keygen", "--out", str(path))
    assert again.code == 2 and "never overwrites" in again.error_line
    assert path.read_bytes() == before
