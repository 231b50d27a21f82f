"""Found by the K-th write sweep: a run killed after its header and before its start record.

Nothing is lost and nothing fired (the run never started); ``run`` with the same id and input
drives it, and ``resume`` says exactly that instead of asking for an agent spec.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.cli.invoke import child
from tests.crash.agents import run_input


def test_resuming_a_run_killed_before_its_start_record_says_it_never_started(
    tmp_path: Path,
) -> None:
    db, spec = str(tmp_path / "bide.db"), "tests.crash.agents:side_effect"
    env = {"CRASH_LEDGER": str(tmp_path / "ledger.db")}
    killed = child(
        "--db", db, "run", "--run-id", "r", "--agent", spec, run_input("r"),
        BIDE_CRASH="write.after_commit@1", **env,
    )  # fmt: skip
    assert killed.code == -signal.SIGKILL, killed.err
    resumed = child("--db", db, "resume", "r", **env)
    assert resumed.code == 2
    assert "never started" in resumed.error_line, resumed.error_line
