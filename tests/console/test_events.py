"""The console's event stream over plain HTTP: server-sent events with the journaled cursor as
their id, resumed after ``Last-Event-ID``, refusing a bad cursor or run by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from runtime.console import Console
from tests.console.conftest import TOKEN, cli

DONE = "tests.cli.agents:agent"


def _frames(client: TestClient, url: str, **headers: str) -> list[dict[str, Any]]:
    """The stream's frames until it ends (a finished run's stream ends after its end)."""
    frames: list[dict[str, Any]] = []
    with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frame: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line:
                if "data" in frame:
                    frames.append(frame)
                frame = {}
            elif line.startswith("id: "):
                frame["id"] = line[4:]
            elif line.startswith("data: "):
                frame["data"] = json.loads(line[6:])
    return frames


def test_a_run_s_events_stream_with_their_cursor_and_resume_after_last_event_id(
    db_path: Path,
) -> None:
    cli("--db", str(db_path), "run", "--run-id", "d1", "--agent", DONE, "go")
    with TestClient(Console(db_path, token=TOKEN)) as c:
        auth = {"Authorization": "Bearer " + TOKEN}
        everything = _frames(c, "/events?id=d1", **auth)
        assert everything[0]["data"]["type"] == "run_started"
        assert everything[-1]["data"]["type"] == "end"
        assert all(f["id"] == f["data"]["cursor"] for f in everything)
        later = _frames(c, "/events?id=d1", **auth, **{"Last-Event-ID": everything[1]["id"]})
        assert later == everything[2:]
        for bad, code, said in (
            ("/events?id=nope", 404, "no run 'nope'"),
            ("/events?id=d1&after=x", 400, "cursor"),
            ("/events?id=", 400, "run id"),
        ):
            got = c.get(bad, headers=auth)
            assert got.status_code == code and said in got.text, (bad, got.text)
        assert c.get("/events?id=d1").status_code == 401  # the token, as for every page


def test_the_run_page_names_its_stream_after_the_records_it_shows(db_path: Path) -> None:
    cli("--db", str(db_path), "run", "--run-id", "d1", "--agent", DONE, "go")
    with TestClient(Console(db_path, token=TOKEN)) as c:
        page = c.get("/run?id=d1", headers={"Authorization": "Bearer " + TOKEN}).text
        frames = _frames(c, "/events?id=d1", Authorization="Bearer " + TOKEN)
        last = max(int(f["id"].partition(".")[0]) for f in frames)
        assert f"data-events='events?id=d1&amp;after={last}'" in page
