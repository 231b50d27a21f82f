"""Run ownership with real processes: a call in flight is never halted nor resolved, a second
driver is refused naming the first, and a dead driver's run is taken over (at once on this
host, after its lease's TTL from another)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.invoke import child
from tests.conftest import child_env


def spawn(*argv: str, **env: str) -> subprocess.Popen[str]:
    """``python -m runtime ARGV`` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "runtime", *argv],
        env=child_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


READY = """
import sys
from runtime.cli import main
print("imported", flush=True)
sys.stdin.readline()
raise SystemExit(main(sys.argv[1:], prog="python -m runtime"))
"""


def ready(*argv: str, **env: str) -> subprocess.Popen[str]:
    """``python -m runtime ARGV`` in a process started and imported now, that runs ARGV once a
    line reaches its stdin (``communicate("go\\n")``): what it checks is read at that moment,
    not a process start later."""
    process = subprocess.Popen(
        [sys.executable, "-c", READY, *argv],
        env=child_env(**env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "imported\n"
    return process


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> float:
    """Poll ``check`` until it holds; the seconds it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - started


def listed(db: Path, run_id: str) -> dict[str, Any]:
    if not db.exists():
        return {}
    runs = child("list", "--db", str(db), "--json").json().get("runs", [])
    return next((r for r in runs if r["run_id"] == run_id), {})


def shown(db: Path, run_id: str) -> dict[str, Any]:
    done = child("show", "--db", str(db), run_id, "--json")
    return json.loads(done.out) if done.code == 0 else {}


def charges(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_the_newcomers_sequence_ends_with_one_charge(tmp_path: Path) -> None:
    """`run` of a slow charge in the background, `list` while it runs, `resolve --not-executed`,
    `resume`: the call is in flight (not halted), the resolution and the second drive are
    refused naming the process, and the first drive charges once."""
    db, ledger, release = tmp_path / "bide.db", tmp_path / "ledger", tmp_path / "release"
    run = spawn(
        "run", "--db", str(db), "--agent", "tests.cli.owned:slow", "--run-id", "slow-2", "go",
        SLOW="60", RELEASE=str(release), LEDGER=str(ledger),
    )  # fmt: skip
    try:
        wait_for("the charge in flight", lambda: bool(listed(db, "slow-2").get("in_flight")))
        row = listed(db, "slow-2")
        assert row["status"] == "running" and row["halted"] == [] and row["driven"]
        assert [(s["kind"], s["call_id"]) for s in row["in_flight"]] == [("in flight", "c1")]
        assert row["lease"]["owner"]["pid"] == run.pid
        table = child("list", "--db", str(db)).out
        assert f"by process {run.pid} on host" in table and "in flight c1 slow_charge" in table
        told = child("show", "--db", str(db), "slow-2").out
        assert "in flight: c1 slow_charge was attempted" in told

        refused = child("resolve", "--db", str(db), "slow-2", "c1", "--not-executed")
        assert refused.code == 6, refused.err
        assert "call c1 (slow_charge) of run slow-2 is still running in process" in refused.err
        second = child("resume", "--db", str(db), "slow-2")
        assert second.code == 6, second.err
        assert second.error_line.startswith(
            f"bide: error: run slow-2 is being driven by process {run.pid} on host "
        )
        assert "lease until" in second.error_line
        release.touch()
        out, err = run.communicate(timeout=60)
    finally:
        if run.returncode is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    assert out == "charged\n"
    assert charges(ledger) == ["slow-2 c1"]
    assert shown(db, "slow-2")["status"] == "completed"


def test_a_driver_killed_on_another_host_is_waited_for_until_its_lease_expires(
    tmp_path: Path,
) -> None:
    """A lease held from another host is live until its TTL: resolve is refused until then; then
    the run shows halted, the truth (not executed) is accepted, and resume charges once."""
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"
    # The lease has at least two thirds of its TTL left at the kill (it is renewed every third):
    # 4 s, for a `resolve` started and imported beforehand to read it.
    ttl = 6.0
    run = spawn(
        "run", "--db", str(db), "--agent", "tests.cli.owned:slow", "--run-id", "r", "go",
        SLOW="60", LEDGER=str(ledger), BIDE_HOST="another-host", BIDE_LEASE_TTL=str(ttl),
    )  # fmt: skip
    resolve = ready("resolve", "--db", str(db), "r", "c1", "--not-executed")
    try:
        wait_for("the charge in flight", lambda: bool(listed(db, "r").get("in_flight")))
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate()
        killed = time.monotonic()
        _, refused = resolve.communicate("go\n", timeout=60)
    assert resolve.returncode == 6, refused
    assert "still running in process" in refused and "another-host" in refused
    waited = wait_for("halted", lambda: shown(db, "r").get("status") == "halted", timeout=30)
    print(f"halted {time.monotonic() - killed:.2f} s after the kill (lease TTL {ttl} s)")
    assert time.monotonic() - killed <= ttl + 5, waited
    tells = child("show", "--db", str(db), "r").out
    assert "halted: c1 slow_charge was attempted" in tells
    accepted = child("resolve", "--db", str(db), "r", "c1", "--not-executed", "--by", "ops")
    assert accepted.code == 0, accepted.err
    resumed = child("resume", "--db", str(db), "r", LEDGER=str(ledger))
    assert (resumed.code, resumed.out) == (0, "charged\n"), resumed.err
    assert charges(ledger) == ["r c1"]


def test_resume_right_after_a_kill_on_this_host_takes_over_at_once(tmp_path: Path) -> None:
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"
    run = spawn(
        "run", "--db", str(db), "--agent", "tests.cli.owned:slow", "--run-id", "r", "go",
        SLOW="60", LEDGER=str(ledger), BIDE_LEASE_TTL="600",
    )  # fmt: skip
    try:
        wait_for("the charge in flight", lambda: bool(listed(db, "r").get("in_flight")))
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate()
    assert listed(db, "r")["status"] == "halted"  # its process is gone: nothing is in flight
    started = time.monotonic()
    resumed = child("resume", "--db", str(db), "r", "--json")
    assert resumed.code == 4, resumed.err  # halted on the call it may have made, at once
    assert time.monotonic() - started < 60
    assert resumed.events()[0]["event"] == "lease_taken_over"
    assert charges(ledger) == []


def test_two_resumes_started_together_one_drives_and_the_other_is_refused(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "bide.db")
    spec = "tests.cli.owned:lookup"
    # Killed inside its READ_ONLY lookup: each resume asks for the turn again and runs it.
    crashed = child(
        "run", "--db", db, "--agent", spec, "--run-id", "r", "go", BIDE_CRASH="tool.after_call@1"
    )
    assert crashed.code == -signal.SIGKILL
    both = [spawn("resume", "--db", db, "r", SLOW="2") for _ in range(2)]
    results = [(p.pid, *p.communicate(timeout=60), p.returncode) for p in both]
    codes = sorted(code for *_, code in results)
    assert codes == [0, 6], results
    ((driver, out, _, _),) = [r for r in results if r[3] == 0]
    ((_, _, err, _),) = [r for r in results if r[3] == 6]
    assert out == "looked\n"
    assert f"run r is being driven by process {driver} on host" in err
    assert shown(tmp_path / "bide.db", "r")["status"] == "completed"


def _stopped(process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait until ``process`` is stopped (SIGSTOP: state T in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{process.pid}/stat") as f:
            if f.read().rpartition(")")[2].split()[0] in ("T", "t"):
                return
        if process.poll() is not None:
            raise AssertionError(f"it exited: {process.communicate()}")
        time.sleep(0.02)
    raise AssertionError("it never stopped")


def test_a_driver_that_wakes_after_its_lease_ended_sends_nothing(tmp_path: Path) -> None:
    """Stopped right after its marker committed, before the charge left; its lease (1 s) runs
    out; a resume takes the run over, its reconciler finds no charge and settles the attempt
    (settle 0), and attempt 2 charges. Woken then, the first driver must not charge: its own
    deadline for the lease has passed and the renewal it tries is refused."""
    db, ledger = str(tmp_path / "bide.db"), tmp_path / "ledger"
    env = {"LEDGER": str(ledger), "SETTLE": "0", "BIDE_LEASE_TTL": "1"}
    first = spawn(
        "run", "--db", db, "--agent", "tests.cli.owned:reconciled", "--run-id", "r", "go",
        BIDE_CRASH="attempt.after_marker@1:stop", **env,
    )  # fmt: skip
    try:
        _stopped(first)
        time.sleep(1.5)  # its lease runs out
        second = child("resume", "--db", db, "r", **env)
        assert second.code == 0, second.err
        assert ledger.read_text().splitlines() == ["r c1"]  # attempt 2 charged
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=60)
    assert ledger.read_text().splitlines() == ["r c1"], "the woken driver charged again"
    assert first.returncode == 1, out + err
    assert "sends no side effect" in err or "was taken over" in err, err
    shown = child("show", "--db", db, "r", "--json")
    results = json.loads(shown.out)
    assert results["status"] == "completed"


def _faketime(offset: str) -> list[str]:
    """A command prefix that runs a process with its wall clock moved by ``offset`` (``+120s``,
    ``-1h``) and its monotonic and boot-time clocks untouched, as an NTP step moves them."""
    found = shutil.which("faketime")
    if found is None:
        pytest.skip("faketime is not installed (Debian's faketime package; .ci/run installs it)")
    return [found, "-f", offset]


@pytest.mark.parametrize("offset", ["+120s", "+1h", "-1h"])
def test_a_worker_whose_wall_clock_stepped_takes_no_live_run_on_sqlite(
    tmp_path: Path, offset: str
) -> None:
    """A process on this host drives a slow charge; a worker whose wall clock was stepped (two
    minutes or an hour ahead, an hour back) looks for runs while it does. The lease is timed
    on the host's boot-time clock, which the step did not move: the worker takes nothing, and
    the charge is made once."""
    db, ledger, release = tmp_path / "bide.db", tmp_path / "ledger", tmp_path / "release"
    run = spawn(
        "run", "--db", str(db), "--agent", "tests.cli.owned:slow", "--run-id", "r", "go",
        SLOW="60", RELEASE=str(release), LEDGER=str(ledger), BIDE_LEASE_TTL="3",
    )  # fmt: skip
    try:
        wait_for("the charge in flight", lambda: bool(listed(db, "r").get("in_flight")))
        env = child_env(LEDGER=str(ledger), FAKETIME_DONT_FAKE_MONOTONIC="1")
        worker = subprocess.run(
            [*_faketime(offset), sys.executable, "-m", "runtime", "worker", "--db", str(db),
             "--poll", "0.1", "--exit-when-idle", "4", "--name", "stepped"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        assert "worker_claimed" not in worker.stderr, worker.stderr
        release.touch()
        out, err = run.communicate(timeout=60)
    finally:
        if run.returncode is None:
            run.kill()
            run.communicate()
    assert (run.returncode, out) == (0, "charged\n"), err
    assert charges(ledger) == ["r c1"]
