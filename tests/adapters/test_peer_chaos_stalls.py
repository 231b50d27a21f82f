"""An attempt of a bide peer chaos adapter that stalls says where: it writes every thread's stack
to its log (``$BIDE_CHAOS_STACKS``), and the test wrapper fails showing those stacks."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adapters.peer_chaos import ADAPTERS, HARNESS, needs_harness, stalls
from tests.conftest import child_env

pytestmark = needs_harness

STALLING_ATTEMPT = """
import sys, time
sys.path[:0] = sys.argv[1:3]
from bide_chaos_common import watch

def wait_for_a_lock_nobody_releases():
    time.sleep(2.5)

watch()
wait_for_a_lock_nobody_releases()
"""


def attempt(log: Path, stacks: str) -> subprocess.CompletedProcess[str]:
    """One attempt's process, its stderr in ``log`` as the harness's child has it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as err:
        return subprocess.run(
            [sys.executable, "-c", STALLING_ATTEMPT, str(ADAPTERS), str(HARNESS)],
            env=child_env(BIDE_CHAOS_STACKS=stacks),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=60,
        )


def test_a_stalled_attempt_writes_its_stacks_and_the_wrapper_finds_them(tmp_path: Path) -> None:
    log = tmp_path / "work" / "pc-x" / "seed1-abc" / "attempt2.log"
    assert attempt(log, "1").returncode == 0
    found = stalls(tmp_path / "work")
    assert len(found) == 1
    assert found[0].startswith("pc-x/seed1-abc/attempt2.log:\nTimeout (0:00:01)!")
    assert "wait_for_a_lock_nobody_releases" in found[0]


def test_an_attempt_within_its_time_leaves_no_stacks(tmp_path: Path) -> None:
    assert attempt(tmp_path / "work" / "pc-x" / "seed1-abc" / "attempt1.log", "30").returncode == 0
    assert stalls(tmp_path / "work") == []


@pytest.mark.parametrize("stacks", ["soon", "0", "-1"])
def test_a_time_that_is_not_seconds_is_refused_naming_the_variable(
    tmp_path: Path, stacks: str
) -> None:
    log = tmp_path / "attempt1.log"
    assert attempt(log, stacks).returncode == 1
    assert f"$BIDE_CHAOS_STACKS must be a number of seconds above 0, not {stacks!r}" in (
        log.read_text()
    )


SILENT_SERVER_READ = """
import os, sys
sys.path[:0] = sys.argv[1:3]
os.environ["BIDE_CHAOS_DB"] = sys.argv[3]
from bide_chaos_common import run_status

try:
    run_status("unused", "r")
except TimeoutError as exc:
    print("gave up:", type(exc).__name__)
"""


def test_a_journal_read_the_server_never_answers_gives_up(tmp_path: Path) -> None:
    """The harness's reads of a PostgreSQL journal (and the model's check that the charge is
    recorded, which blocks the drive's loop) give up after ``READ_TIMEOUT``: a server that
    takes the connection and never answers held them a minute, past the attempt's limit."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # connections complete in the backlog; nothing ever answers them
        url = f"postgresql://postgres@127.0.0.1:{server.getsockname()[1]}/silent"
        done = subprocess.run(
            [sys.executable, "-c", SILENT_SERVER_READ, str(ADAPTERS), str(HARNESS), url],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=40,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "gave up: TimeoutError\n"
