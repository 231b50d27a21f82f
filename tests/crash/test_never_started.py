"""Found by the K-th write sweep: a run killed after its header and before its start record.

Nothing is lost and nothing fired (the run never started); ``run`` with the same id and input
drives it. But ``resume`` says the run "was started without an agent spec" and tells the operator
to name one with ``--agent``, which then fails with "was never started", while ``list`` shows the
run as ``running``. The message should say the run never started and how to start it.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.cli.invoke import child
from tests.crash.agents import run_input


@pytest.mark.xfail(
    strict=True,
    reason="CLI bug: cli/drive.py _resume treats a run with a header and no start record as "
    "'started without an agent spec' instead of 'never started: run it again'",
)
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
