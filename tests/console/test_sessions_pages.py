"""The console's sessions pages, a session run's page, and a typed output and usage on pages."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from runtime.console import Console
from tests.console.conftest import TOKEN, cli


def test_sessions_their_runs_and_what_a_run_page_says(db_path: Path) -> None:
    db = ("--db", str(db_path))
    chatty = ("--agent", "tests.cli.agents:chatty", "--session", "t-1")
    assert cli(*db, "run", *chatty, "--run-id", "m1", "who is ann?") == 0
    assert cli(*db, "run", *chatty, "--run-id", "m2", "and bob?") == 0
    assert cli(*db, "run", "--agent", "tests.cli.typed_agents:typed", "--run-id", "q", "quote") == 0
    assert cli(*db, "run", "--agent", "tests.cli.agents:spender", "--run-id", "d", "go") == 0
    with TestClient(Console(db_path, token=TOKEN)) as c:
        assert c.get("/?token=" + TOKEN).status_code == 200
        listing = c.get("/sessions").text
        assert "sessions?name=t-1" in listing and "run?id=m2" in listing
        assert "completed" in listing
        runs = c.get("/sessions?name=t-1").text
        assert runs.index("run?id=m1") < runs.index("run?id=m2")
        assert c.get("/sessions?name=nope").status_code == 404
        assert c.get("/sessions?name=").status_code == 400
        page = c.get("/run?id=m2").text
        assert "sessions?name=t-1" in page and "(message 2)" in page
        typed = c.get("/run?id=q").text
        assert "&#34;cents&#34;: 1200" in typed or "&quot;cents&quot;: 1200" in typed
        assert "750" in c.get("/").text  # the runs table's tokens column
        assert "700 in / 50 out" in c.get("/run?id=d").text
        # The sessions' own journals are no runs: the runs table leaves them out.
        assert "session:t-1" not in c.get("/").text


def test_the_schedules_page_lists_schedules_with_last_and_next_runs(db_path: Path) -> None:
    db = ("--db", str(db_path))
    add = ("schedule", "add", "report", "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris")
    assert cli(*db, *add, "--agent", "tests.cli.agents:chatty", "--input", "report") == 0
    assert cli(*db, "queue", "set", "payments", "--key-concurrency", "1") == 0
    with TestClient(Console(db_path, token=TOKEN)) as c:
        assert c.get("/?token=" + TOKEN).status_code == 200
        assert "href='schedules'" in c.get("/").text
        text = c.get("/schedules").text
        assert "report" in text and "0 9 * * 1-5" in text and "Europe/Paris" in text
        assert "payments" in text and "per key 1" in text
        assert "09:00:00" in text or ":00:00" in text  # the next run, in local time
