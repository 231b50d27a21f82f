"""``show --follow``: a run's events printed as another process journals them."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.cli.invoke import Cli
from tests.conftest import child_env


class Lines:
    """A child's stdout lines, read by a thread of their own: ``next`` waits for one, bounded
    (a select on the pipe would miss lines the reader already buffered)."""

    def __init__(self, process: subprocess.Popen[str]):
        self._lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [self._lines.put(x) for x in stdout], daemon=True).start()

    def next(self, timeout: float = 30) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("show --follow printed nothing in time") from None
        event: dict[str, Any] = json.loads(line)
        return event


def test_follow_prints_the_events_as_they_are_journaled_until_the_end(
    cli: Cli, tmp_path: Path
) -> None:
    db = str(tmp_path / "bide.db")
    halted = cli("--db", db, "run", "--run-id", "h-1", "--agent", "tests.cli.agents:halting", "go")
    assert halted.code == 4
    with (
        (tmp_path / "follow.err").open("w") as err,
        subprocess.Popen(
            [sys.executable, "-m", "runtime", "--db", db, "show", "--follow", "h-1", "--json"],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as follower,
    ):
        try:
            _follow_to_the_end(cli, db, follower, Lines(follower))
        finally:
            if follower.poll() is None:
                follower.kill()
    assert follower.returncode == 0, (tmp_path / "follow.err").read_text()


def _follow_to_the_end(cli: Cli, db: str, follower: subprocess.Popen[str], lines: Lines) -> None:
    seen = [lines.next()]
    while seen[-1]["type"] != "halt":
        seen.append(lines.next())
    assert [e["type"] for e in seen] == ["run_started", "turn", "tool_call", "attempt", "halt"]
    # Still following: the resolution and the rest of the run arrive as they are journaled.
    assert follower.poll() is None
    said = cli("--db", db, "resolve", "h-1", "c1", "--succeeded", '{"id": "ch_1"}')
    assert said.code == 0, said.err
    resolution = lines.next()
    assert (resolution["type"], resolution["outcome"]) == ("resolution", "value")
    assert cli("--db", db, "resume", "h-1").code == 0
    rest = [lines.next()]
    while rest[-1]["type"] != "end":
        rest.append(lines.next())
    assert rest[-1]["status"] == "completed"
    follower.wait(timeout=30)
    cursors = [e["cursor"] for e in [*seen, resolution, *rest]]
    assert len(set(cursors)) == len(cursors)


def test_follow_after_a_cursor_prints_only_what_came_after_it(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "bide.db")
    assert (
        cli("--db", db, "run", "--run-id", "d-1", "--agent", "tests.cli.agents:agent", "go").code
        == 0
    )
    everything = cli("--db", db, "show", "--follow", "d-1", "--json")
    assert everything.code == 0
    events = [json.loads(line) for line in everything.out.splitlines()]
    assert events[-1]["type"] == "end"
    later = cli("--db", db, "show", "--follow", "d-1", "--after", events[1]["cursor"])
    assert later.code == 0
    lines = later.out.splitlines()
    assert len(lines) == len(events) - 2
    assert lines[0].startswith(f"[{events[2]['cursor']}] {events[2]['type']}")
    refused = cli("--db", db, "show", "--follow", "d-1", "--after", "nine")
    assert refused.code == 2 and "cursor" in refused.err
