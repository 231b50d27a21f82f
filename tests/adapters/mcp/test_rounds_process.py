"""Input rounds across processes: a side effect asks for confirmation mid-call, the run waits and
its process exits; ``answer`` and then ``resume``, each in a new process, complete it, and the
server (a process of its own, over streamable HTTP) sees each round once. A host killed with the
second round in flight halts on resume, and the round is never sent again."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.mcp.processes import Serve, count, host_process, kill_when, load_state
from tests.cli.invoke import child

SPEC = "tests.adapters.mcp.task_agent:confirming"


def _ask(db: Path, url: str) -> str:
    """Run until the transfer's question; the key the run waits on."""
    waited = child("run", "--db", str(db), "--agent", SPEC, "--run-id", "r", "go", ROUND_SERVER=url)
    assert waited.code == 3, waited.err  # waiting
    (call,) = load_state(db).waiting_calls()
    (key,) = call.interrupts
    return key


def test_a_confirmation_answered_in_a_new_process_completes_the_transfer_once(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve("round_server")
    key = _ask(db, url)
    answered = child("answer", "--db", str(db), "r", key, "--value", '{"ok": true}')
    assert answered.code == 0, answered.err
    resumed = child("resume", "--db", str(db), "r", ROUND_SERVER=url)
    assert (resumed.code, resumed.out) == (0, "sent\n"), resumed.err
    assert ledger.read_text().splitlines() == ["round 1", "round 2", "transfer 5"]


def test_a_host_killed_with_the_answered_round_in_flight_halts_and_never_resends_it(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve("round_server", HANG_ROUND="2")
    key = _ask(db, url)
    assert child("answer", "--db", str(db), "r", key, "--value", '{"ok": true}').code == 0
    host = host_process("resume", "--db", str(db), "r", ROUND_SERVER=url)
    kill_when(host, ledger, "round", times=2)  # round 2 reached the server
    resumed = child("resume", "--db", str(db), "r", ROUND_SERVER=url)
    assert resumed.code == 4, resumed.err  # halted: round 2 may have acted
    assert count(ledger, "round") == 2 and count(ledger, "transfer") == 0
    assert load_state(db).status() == "halted"
