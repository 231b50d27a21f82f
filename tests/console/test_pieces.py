"""The console's small parts: escaping by default, status badges, the chart, durations, layering."""

from __future__ import annotations

from pathlib import Path

from runtime.console.chart import BUCKETS, ages, chart
from runtime.console.html import Html, esc, join
from runtime.console.pages import durations
from runtime.console.status import STATUSES, badge
from runtime.journal import Journal
from runtime.result import RunStatus
from runtime.runs import Row
from runtime.stops import Stop
from runtime.timeline import timeline
from tests.conftest import run_child
from tests.console.conftest import cli

CSS = Path(__file__).resolve().parents[2] / "runtime" / "console" / "static" / "console.css"


def test_every_value_put_into_html_is_escaped_unless_it_is_html() -> None:
    evil = "<script>alert('x')</script>&\""
    made = Html("<p title='{t}'>{body}</p>").format(t=evil, body=evil)
    assert "<script>" not in made and "'x'" not in made
    assert made.count("&lt;script&gt;") == 2
    assert Html("<b>{x}</b>").format(x=Html("<i>ok</i>")) == "<b><i>ok</i></b>"
    assert Html("<b>") + "<i>" == "<b>&lt;i&gt;"
    assert join(["<a>", Html("<br>")]) == "&lt;a&gt;<br>"
    assert esc(None) == "" and esc(3) == "3"
    assert Html("{n:.1f}").format(n=2.25) == "2.2"


def test_every_status_a_run_can_have_has_a_badge_and_a_colour() -> None:
    css = CSS.read_text()
    for status in RunStatus:
        assert status.value in STATUSES
        assert f".status-{status.value} " in css
        assert f"status-{status.value}" in badge(status.value)


def test_a_status_word_the_console_does_not_know_is_shown_as_it_is() -> None:
    shown = badge("orphaned<b>")
    assert "status-other" in shown and "orphaned&lt;b&gt;" in shown


def _row(status: str, updated_ms: int, attempted_ms: int | None = None) -> Row:
    halted = ()
    if attempted_ms is not None:
        halted = (Stop("halted", "c1", "charge", {}, attempted_at_ms=attempted_ms),)
    return Row("r", status, None, 1, 0, updated_ms, halted=halted)


def test_halts_and_waits_are_counted_by_how_long_they_have_been_stopped() -> None:
    now = 10 * 86_400_000
    minute, hour, day = 60_000, 3_600_000, 86_400_000
    rows = [
        _row("halted", now, attempted_ms=now - 2 * hour),  # the attempt's age, not the update's
        _row("halted", now - 2 * minute),
        _row("waiting", now - 3 * day),
        _row("waiting", now - 9 * day),
        _row("completed", now - 9 * day),
    ]
    counts = ages(rows, now)
    assert [label for label, _ in BUCKETS] == ["< 5 min", "< 1 h", "< 1 day", "< 1 week", "older"]
    assert counts == {"halted": [1, 0, 1, 0, 0], "waiting": [0, 0, 0, 1, 1]}
    drawn = chart(counts)
    assert drawn.startswith("<svg") and drawn.count("class='bar bar-halted'") == len(BUCKETS)
    assert "<title>1 halted, &lt; 1 day</title>" in drawn


def test_the_core_never_imports_the_console_and_the_cli_loads_it_only_for_its_command() -> None:
    root = CSS.parents[2]
    for path in sorted((root / "runtime").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("runtime/console/") or rel == "runtime/cli/console.py":
            continue
        assert "runtime.console" not in path.read_text(), rel
    code = (
        "import sys, runtime, runtime.cli; "
        "assert not {'runtime.console', 'starlette', 'uvicorn'} & set(sys.modules)"
    )
    done = run_child(code)
    assert done.returncode == 0, done.stderr


async def test_each_call_shows_how_long_it_took_from_its_marker_or_its_turn(
    db_path: Path,
) -> None:
    cli("--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:agent", "go")
    async with Journal(db_path, migrate=False) as journal:
        told = timeline(await journal.require("r"))
    turn = next(e for e in told.events if e.kind == "turn")
    result = next(e for e in told.events if e.kind == "result")
    assert durations(told) == {result.seq: result.at_ms - turn.at_ms}
