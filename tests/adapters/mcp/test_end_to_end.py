"""End to end: a side effect on a stdio MCP server that acts and hangs up halts the run, in this
process and in a fresh one; `resolve` then `resume` completes it; the server counted one call."""

from __future__ import annotations

from pathlib import Path

from tests.cli.invoke import child


def test_a_server_that_acts_then_hangs_up_halts_until_resolved(tmp_path: Path) -> None:
    db, runs = str(tmp_path / "bide.db"), tmp_path / "runs.txt"
    env = {"BIDE_TEST_RUNS": str(runs)}
    first = child(
        "--db", db, "run", "--run-id", "r", "--agent", "tests.cli.agents:mcp_hangs_up", "go", **env
    )
    assert first.code == 4, first.err
    assert "die" in first.err
    again = child("--db", db, "resume", "r", **env)
    assert again.code == 4, again.err
    assert runs.read_text().splitlines() == ["die"], "the server saw the call exactly once"
    resolved = child(
        "--db",
        db,
        "resolve",
        "r",
        "c1",
        "--succeeded",
        '"it died after acting"',
        "--by",
        "ops",
        "--evidence",
        "server log",
        **env,
    )
    assert resolved.code == 0, resolved.err
    done = child("--db", db, "resume", "r", **env)
    assert done.code == 0, done.err
    assert done.out.strip() == "done"
    assert runs.read_text().splitlines() == ["die"]
