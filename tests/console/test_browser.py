"""The console driven in headless Chromium: what an operator sees and clicks, and what it journals.

Every action taken here on a ``*-web`` run is taken by the CLI on its ``*-cli`` twin; after a
``resume`` from the CLI both runs' journals must hold the same records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright

from runtime.tools import idempotency_key_for
from tests.conftest import ROOT
from tests.console.conftest import (
    OPERATOR,
    RUNS,
    SIGNED,
    TOKEN,
    Served,
    chromium,
    cli,
    records,
    serve,
)

CHROMIUM = chromium()
if CHROMIUM is None:
    print("tests/console/test_browser.py: skipped, no chromium found (apt-get install chromium)")
    pytest.skip("no chromium executable found (apt-get install chromium)", allow_module_level=True)

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 8000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    """A fresh browser context that opened the console's address with its token once."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" else None,
    )
    p.goto(served.url + "?token=" + TOKEN)
    try:
        yield p
    finally:
        context.close()
    # A CSP violation, a script error or a missing asset shows up here; a refusal (409) is meant.
    assert [e for e in errors if "status of 409" not in e] == [], errors


def screenshot(p: Any, name: str, tmp_path: Path) -> Path:
    """Save a screenshot for docs/ (refreshed when BIDE_SCREENSHOTS is set or it is missing)."""
    target = ROOT / "docs" / name
    if target.exists() and not os.environ.get("BIDE_SCREENSHOTS"):
        target = tmp_path / name
    p.screenshot(path=str(target), full_page=True)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return target


def open_run(p: Any, served: Served, run_id: str) -> None:
    p.goto(f"{served.url}run?id={run_id}")
    assert p.inner_text("#run-id") == run_id


def confirm(p: Any, form: str, button_text: str | None = None) -> dict[str, Any]:
    """Submit ``form`` (a selector), check the confirmation names a record, confirm it, and
    return the record the confirmation said would be journaled."""
    p.click(f"{form} button[type=submit]")
    p.wait_for_selector("#journaled")
    shown: dict[str, Any] = json.loads(p.inner_text("#journaled"))
    p.click("#confirm")
    p.wait_for_selector("#run-id")
    return shown


def same_journal(db: Path, web: str, cli_twin: str) -> None:
    """The two runs hold the same records, key by key, kind by kind, payload by payload (but for
    the id each drive gives itself)."""

    def told(run_id: str) -> list[Any]:
        return [(k, kind, _without_driver(p)) for k, kind, p in records(db, run_id)]

    assert told(web) == told(cli_twin)


def _without_driver(payload: Any) -> Any:
    if isinstance(payload, dict):
        return {k: _without_driver(v) for k, v in payload.items() if k != "driver"}
    return payload


def test_the_runs_page_lists_a_run_in_every_status_and_filters(
    page: Any, served: Served, tmp_path: Path
) -> None:
    rows = page.locator("#runs tbody tr")
    statuses = {r.get_attribute("data-status") for r in rows.all()}
    assert statuses == {"orphaned", "waiting", "halted", "completed", "failed", "cancelled"}
    assert rows.count() == len(RUNS) + 1  # and the signed gate's run
    # The chart: 4 halted and 11 waiting runs, all stopped for less than 5 minutes.
    assert page.locator("svg.chart rect.bar-halted").count() == 5  # one bar per age bucket
    chart = page.inner_html("svg.chart")
    assert "<title>4 halted, &lt; 5 min</title>" in chart
    assert "<title>11 waiting, &lt; 5 min</title>" in chart
    screenshot(page, "console-runs.png", tmp_path)

    page.select_option("#status", "halted")
    page.click(".filters button[type=submit]")
    page.wait_for_url("**status=halted**")
    ids = [r.get_attribute("data-run-id") for r in page.locator("#runs tbody tr").all()]
    assert ids and all(i and i.startswith("halt-") for i in ids)

    page.select_option("#status", "")
    page.fill("#prefix", "gate-web")
    page.click(".filters button[type=submit]")
    page.wait_for_url("**prefix=gate-web**")
    ids = [r.get_attribute("data-run-id") for r in page.locator("#runs tbody tr").all()]
    assert sorted(ids) == ["gate-web-cancel", "gate-web-no", "gate-web-yes"]


def test_the_runs_page_refreshes_itself_when_a_run_appears(page: Any, served: Served) -> None:
    page.goto(served.url + "?prefix=late-")
    assert page.locator("#runs tbody tr[data-run-id]").count() == 0
    cli("--db", str(served.db), "run", "--run-id", "late-1", "--agent", RUNS["done-1"], "go")
    page.wait_for_selector("#runs tr[data-run-id='late-1']", timeout=WAIT_MS)


def test_resolving_a_halted_run_journals_what_the_confirmation_showed_as_the_cli_would(
    page: Any, served: Served, tmp_path: Path
) -> None:
    open_run(page, served, "halt-web")
    assert page.inner_text("#run-status") == "halted"
    assert page.inner_text(".stop-halted code.key") == idempotency_key_for("halt-web", "c1")
    screenshot(page, "console-run.png", tmp_path)
    value = {"charge_id": "ch_1"}
    page.fill(".resolve-succeeded textarea[name=value]", json.dumps(value))
    page.fill(".resolve-succeeded input[name=evidence]", "ledger ch_1")
    shown = confirm(page, ".resolve-succeeded")
    assert page.inner_text("#message") == "resolved"
    assert "python -m runtime resume halt-web" in page.inner_text("#next")
    assert shown["value"] == value and shown["resolved"] == {
        "by": OPERATOR,
        "evidence": "ledger ch_1",
    }
    assert records(served.db, "halt-web")[-1][2] == shown  # exactly what it said it would write

    db = str(served.db)
    resolved = cli(
        "--db", db, "resolve", "halt-cli", "c1", "--succeeded", json.dumps(value),
        "--by", OPERATOR, "--evidence", "ledger ch_1",
    )  # fmt: skip
    assert resolved == 0
    assert cli("--db", db, "resume", "halt-web") == 0
    assert cli("--db", db, "resume", "halt-cli") == 0
    same_journal(served.db, "halt-web", "halt-cli")


def test_approving_one_gate_and_denying_another_journal_as_the_cli_does(
    page: Any, served: Served
) -> None:
    db = str(served.db)
    open_run(page, served, "gate-web-yes")
    shown = confirm(page, ".stop-approval form.action:not(.deny):not(.signed)")
    assert shown["decision"] == {"approver": OPERATOR, "approve": True, "signature": None}
    assert "gate approved" in page.inner_text("#message")
    assert "python -m runtime resume gate-web-yes" in page.inner_text("#next")
    assert page.locator(".stop-approval form").count() == 0  # decided: nothing more to click
    open_run(page, served, "gate-web-no")
    shown = confirm(page, ".stop-approval form.deny")
    assert shown["decision"]["approve"] is False
    assert "gate denied" in page.inner_text("#message")

    assert cli("--db", db, "approve", "gate-cli-yes", "c1", "--by", OPERATOR) == 0
    assert cli("--db", db, "approve", "gate-cli-no", "c1", "--deny", "--by", OPERATOR) == 0
    for run_id in ("gate-web-yes", "gate-web-no", "gate-cli-yes", "gate-cli-no"):
        assert cli("--db", db, "resume", run_id) == 0
    same_journal(served.db, "gate-web-yes", "gate-cli-yes")
    same_journal(served.db, "gate-web-no", "gate-cli-no")
    denied = records(served.db, "gate-web-no")
    assert any(
        p.get("error", {}).get("type") == "approval_denied" for _, k, p in denied if k == "result"
    )


def test_a_wrong_answer_is_refused_then_the_right_one_is_journaled(
    page: Any, served: Served
) -> None:
    db = str(served.db)
    before = records(served.db, "ask-web")
    open_run(page, served, "ask-web")
    assert json.loads(page.inner_text(".schema pre")) == {"type": "integer"}
    page.fill(".answer textarea[name=value]", '"cheap"')
    confirm(page, ".answer")
    assert "does not fit" in page.inner_text("#refusal")
    assert records(served.db, "ask-web") == before  # nothing journaled

    page.fill(".answer textarea[name=value]", "42")
    shown = confirm(page, ".answer")
    assert shown == {"call_id": "c1", "key": "price", "value": 42, "by": OPERATOR}
    assert page.inner_text("#message") == "answer recorded"

    assert cli("--db", db, "answer", "ask-cli", "price", "--value", "42", "--by", OPERATOR) == 0
    assert cli("--db", db, "resume", "ask-web") == 0
    assert cli("--db", db, "resume", "ask-cli") == 0
    same_journal(served.db, "ask-web", "ask-cli")


def test_a_signal_sent_from_the_console_is_journaled_as_the_cli_sends_it(
    page: Any, served: Served
) -> None:
    db = str(served.db)
    open_run(page, served, "signal-web")
    assert "waits for a signal paid" in page.inner_text(".stop-signal")
    page.fill(".signal textarea[name=value]", "500")
    shown = confirm(page, ".signal")
    assert shown == {"name": "paid", "value": 500, "by": OPERATOR}
    assert page.inner_text("#message") == "signal paid sent"
    assert cli("--db", db, "signal", "signal-cli", "paid", "--value", "500", "--by", OPERATOR) == 0
    assert cli("--db", db, "resume", "signal-web") == 0
    assert cli("--db", db, "resume", "signal-cli") == 0

    def told(run_id: str) -> list[Any]:  # the signal's id is the sender's own
        return [(kind, p.get("value")) for _, kind, p in records(served.db, run_id)[-5:]]

    assert told("signal-web") == told("signal-cli")
    assert ("signal", 500) in told("signal-web")


def test_cancelling_a_run_journals_as_the_cli_does(page: Any, served: Served) -> None:
    db = str(served.db)
    open_run(page, served, "gate-web-cancel")
    page.fill(".cancel input[name=reason]", "customer withdrew")
    shown = confirm(page, "form.cancel")
    assert shown == {"reason": "customer withdrew", "by": OPERATOR}
    assert page.inner_text("#run-status") == "cancelled"
    assert cli(
        "--db", db, "cancel", "gate-cli-cancel", "--reason", "customer withdrew", "--by", OPERATOR
    ) == 0  # fmt: skip
    assert cli("--db", db, "resume", "gate-web-cancel") == 5
    assert cli("--db", db, "resume", "gate-cli-cancel") == 5
    same_journal(served.db, "gate-web-cancel", "gate-cli-cancel")


def test_a_tool_result_holding_a_script_is_shown_as_text_and_never_runs(
    page: Any, served: Served
) -> None:
    open_run(page, served, "hostile-1")
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.locator("#pwned-img").count() == 0
    assert "<script>window.pwned = 1</script>" in page.inner_text("#timeline")


def test_without_the_token_the_browser_is_shown_nothing(browser: Any, served: Served) -> None:
    context = browser.new_context()
    try:
        p = context.new_page()
        response = p.goto(served.url + "run?id=halt-refuse")
        assert response is not None and response.status == 401
        assert "halt-refuse" not in p.content() and "charge" not in p.content()
        wrong = p.goto(served.url + "?token=not-the-token-at-all")
        assert wrong is not None and wrong.status == 401
    finally:
        context.close()


def test_a_post_without_the_csrf_token_changes_nothing(page: Any, served: Served) -> None:
    before = records(served.db, "halt-csrf")
    form = {"action": "resolve", "call_id": "c1", "outcome": "not_executed"}
    refused = page.request.post(served.url + "act?id=halt-csrf", multipart=form)
    assert refused.status == 403
    forged = page.request.post(served.url + "act?id=halt-csrf", multipart={**form, "csrf": "x"})
    assert forged.status == 403
    assert page.request.get(served.url + "act?id=halt-csrf").status == 405
    assert records(served.db, "halt-csrf") == before


def test_decisions_signed_offline_are_uploaded_or_pasted_and_open_the_gate(
    page: Any, served: Served, keys: dict[str, Path], tmp_path: Path
) -> None:
    db = str(served.db)
    signed = {}
    for who in ("alice", "bob"):
        signed[who] = tmp_path / f"{who}.json"
        assert cli("--db", db, "approve", SIGNED, "c1", "--approver", who,
                   "--key", str(keys[who]), "--out", str(signed[who])) == 0  # fmt: skip
    open_run(page, served, SIGNED)
    page.set_input_files(".signed input[type=file]", str(signed["alice"]))
    shown = confirm(page, ".signed")
    assert shown["decision"]["approver"] == "alice" and shown["decision"]["signature"]
    assert "gate pending, 1 of 2" in page.inner_text("#message")
    page.fill(".signed textarea[name=decision]", signed["bob"].read_text())
    confirm(page, ".signed")
    assert "gate approved, 2 of 2" in page.inner_text("#message")
    assert cli("--db", db, "resume", SIGNED) == 0


def test_the_run_page_follows_the_run_s_event_stream_instead_of_polling(
    browser: Any, tmp_path: Path
) -> None:
    """A halted run's page, open in the browser: it asks for its page again only when the
    stream brings an event (not every 3 s), and shows the resolution and the run's end that
    another process journals, without a reload."""
    db = tmp_path / "bide.db"
    assert cli("--db", str(db), "run", "--run-id", "live-1", "--agent", RUNS["halt-web"], "go") == 4
    with serve(db, BIDE_CONSOLE_TOKEN=TOKEN) as site:
        context = browser.new_context()
        context.set_default_timeout(WAIT_MS)
        p = context.new_page()
        errors: list[str] = []
        p.on("pageerror", lambda exc: errors.append(str(exc)))
        fetched: list[str] = []
        p.on("request", lambda r: fetched.append(r.url) if "run?id=live-1" in r.url else None)
        try:
            p.goto(site.url + "?token=" + TOKEN)
            p.goto(f"{site.url}run?id=live-1")
            p.wait_for_selector("body[data-following]")
            assert p.locator("tr.event-end").count() == 0
            loaded = len(fetched)
            p.wait_for_timeout(3500)  # longer than the old polling period
            assert len(fetched) == loaded, "the page polled with no event to show"
            said = cli("--db", str(db), "resolve", "live-1", "c1", "--succeeded", '{"id": "ch_9"}')
            assert said == 0
            p.wait_for_selector("tr.event-result")
            assert "ch_9" in p.inner_text("#timeline")
            assert cli("--db", str(db), "resume", "live-1") == 0
            p.wait_for_selector("tr.event-end")
            assert "completed" in p.inner_text("#timeline")
            cursor = p.get_attribute("body", "data-last-event")
            assert cursor is not None and int(cursor.partition(".")[0]) > 0
        finally:
            context.close()
    assert errors == []


def test_the_schedules_page_opens_from_the_runs_page(page: Any, served: Served) -> None:
    page.click("a[href='schedules']")
    page.wait_for_selector("#schedules")
    assert page.inner_text("h1") == "Schedules"
    assert page.query_selector("#queues") is not None
