"""The console's rules over plain HTTP (no browser): the token, CSRF, headers, escaping, refusals,
the operator's name, pagination, and mounting inside another application."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from runtime.console import CONTENT_SECURITY_POLICY, Console
from runtime.errors import ConfigError
from tests.console.conftest import TOKEN, cli, records

HALTING = "tests.cli.agents:halting"
GATED = "tests.cli.agents:gated"
HOSTILE = "tests.console.agents:hostile"


class Tags(HTMLParser):
    """The tags and attributes a browser would see in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attributes: set[str] = set()
        self.scripts: list[str | None] = []
        self.inline = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.attributes.update(name for name, _ in attrs)
        if tag == "script":
            self.scripts.append(dict(attrs).get("src"))
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.inline += data


def make(db: Path, **runs: str) -> Path:
    """Drive each run (``run_id=spec``, ``_`` read as ``-``) with the CLI until it stops."""
    for run_id, spec in runs.items():
        cli("--db", str(db), "run", "--run-id", run_id.replace("_", "-"), "--agent", spec, "go")
    return db


@dataclass
class Site:
    client: TestClient
    db: Path

    def csrf(self, run_id: str = "h2") -> str:
        """The CSRF token from a run page's form (one token serves every form)."""
        page = self.client.get("/run?" + urlencode({"id": run_id})).text
        found = re.search(r"name=csrf value='([0-9a-f]+)'", page)
        assert found is not None
        return found.group(1)

    def post(self, path: str, headers: dict[str, str] | None = None, **form: str) -> Any:
        files = {k: (None, v) for k, v in form.items()}
        return self.client.post(path, files=files, headers=headers, follow_redirects=False)

    def act(self, run_id: str, **form: str) -> Any:
        """POST the form to /act with the page's CSRF token."""
        return self.post(f"/act?id={run_id}", csrf=self.csrf(), **form)


@pytest.fixture
def site(db_path: Path) -> Iterator[Site]:
    """A console acting as alice on a journal with halted, waiting and hostile runs."""
    make(db_path, h1=HALTING, h2=HALTING, g1=GATED, hostile=HOSTILE)
    with TestClient(Console(db_path, token=TOKEN, operator="alice")) as c:
        assert c.get("/?token=" + TOKEN).status_code == 200
        yield Site(c, db_path)


def test_every_request_without_the_token_is_refused_and_shows_nothing(db_path: Path) -> None:
    make(db_path, h1=HALTING)
    before = records(db_path, "h1")
    with TestClient(Console(db_path, token=TOKEN)) as c:
        for path in ("/", "/run?id=h1", "/static/console.js", "/?token=wrong-token-of-some-length"):
            got = c.get(path)
            assert got.status_code == 401, path
            assert "h1" not in got.text and "charge" not in got.text
        assert c.post("/act?id=h1", files={"action": (None, "cancel")}).status_code == 401
        assert c.get("/", headers={"Authorization": "Bearer " + TOKEN}).status_code == 200
    assert records(db_path, "h1") == before  # nothing was journaled


def test_the_token_in_the_address_becomes_a_strict_http_only_cookie(db_path: Path) -> None:
    make(db_path, h1=HALTING)
    with TestClient(Console(db_path, token=TOKEN)) as c:
        traded = c.get(f"/run?id=h1&token={TOKEN}", follow_redirects=False)
        assert traded.status_code == 303
        assert traded.headers["location"] == "/run?id=h1"  # the token leaves the address bar
        cookie = traded.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert c.get("/run?id=h1").status_code == 200


def test_a_token_shorter_than_16_characters_is_refused(db_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        Console(db_path, token="short")


def test_every_page_has_the_csp_and_no_inline_script_style_or_handler(site: Site) -> None:
    for path in ("/", "/run?id=h1", "/run?id=g1", "/run?id=hostile", "/static/console.js"):
        got = site.client.get(path)
        assert got.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert got.headers["x-frame-options"] == "DENY"
        assert got.headers["x-content-type-options"] == "nosniff"
        if "html" not in got.headers["content-type"]:
            continue
        tags = Tags()
        tags.feed(got.text)
        assert tags.scripts == ["static/console.js"], path  # one, from the app, none inline
        assert tags.inline == "", path
        assert not [a for a in tags.attributes if a.startswith("on") or a == "style"], path
        assert "img" not in tags.names, path
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY


def test_a_script_in_a_tool_result_is_escaped_text(site: Site) -> None:
    page = site.client.get("/run?id=hostile").text
    assert "<img src=x" not in page and "<script>window" not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page


def test_a_post_without_or_with_a_wrong_csrf_token_changes_nothing(site: Site) -> None:
    before = records(site.db, "h1")
    form = {"action": "resolve", "call_id": "c1", "outcome": "not_executed"}
    assert site.post("/act?id=h1", **form).status_code == 403
    assert site.post("/act?id=h1", **form, csrf="0" * 64).status_code == 403
    assert site.post("/confirm?id=h1", **form).status_code == 403
    assert records(site.db, "h1") == before
    assert site.act("h1", **form).status_code == 303  # the same form with the token does it


def test_a_change_by_get_is_not_allowed(site: Site) -> None:
    assert site.client.get("/act?id=h1&action=cancel").status_code == 405
    assert site.client.get("/confirm?id=h1&action=cancel").status_code == 405


def test_a_cross_site_post_is_refused_even_with_the_csrf_token(site: Site) -> None:
    before = records(site.db, "h1")
    refused = site.post(
        "/act?id=h1",
        headers={"Sec-Fetch-Site": "cross-site"},
        action="cancel",
        csrf=site.csrf("h1"),
    )
    assert refused.status_code == 403
    assert records(site.db, "h1") == before


def test_the_confirmation_journals_nothing_and_shows_the_record(site: Site) -> None:
    before = records(site.db, "h1")
    shown = site.post(
        "/confirm?id=h1",
        csrf=site.csrf("h1"),
        action="resolve",
        call_id="c1",
        outcome="failed",
        error="card declined",
        evidence="ledger",
    )
    assert shown.status_code == 200
    found = re.search(r"<pre id=journaled>(.*?)</pre>", shown.text, re.DOTALL)
    assert found is not None
    payload = json.loads(found.group(1).replace("&quot;", '"'))
    assert payload["outcome"] == "error" and payload["resolved"]["by"] == "alice"
    assert payload["error"]["message"] == "card declined"
    assert records(site.db, "h1") == before


def test_a_conflicting_resolution_is_refused_as_the_cli_refuses_it(site: Site) -> None:
    first = site.act("h1", action="resolve", call_id="c1", outcome="succeeded", value='{"ok": 1}')
    assert first.status_code == 303
    after = records(site.db, "h1")
    refused = site.act("h1", action="resolve", call_id="c1", outcome="not_executed")
    assert refused.status_code == 409 and "a different resolution is refused" in refused.text
    again = site.act("h1", action="resolve", call_id="c1", outcome="succeeded", value='{"ok": 1}')
    assert again.status_code == 303  # the same resolution again is a no-op, as in the CLI
    assert "already" in site.client.get(again.headers["location"]).text
    assert records(site.db, "h1") == after
    assert cli("--db", str(site.db), "resolve", "h1", "c1", "--not-executed") == 2


def test_resolving_a_call_that_is_not_halted_is_refused(site: Site) -> None:
    refused = site.act("g1", action="resolve", call_id="c1", outcome="not_executed")
    assert refused.status_code == 409 and "is not halted" in refused.text


def test_a_bad_value_is_shown_back_and_nothing_is_journaled(site: Site) -> None:
    before = records(site.db, "h1")
    bad = site.post(
        "/confirm?id=h1",
        csrf=site.csrf("h1"),
        action="resolve",
        call_id="c1",
        outcome="succeeded",
        value="{not json",
    )
    assert bad.status_code == 400 and "must be JSON" in bad.text
    deep = site.post(
        "/confirm?id=h1",
        csrf=site.csrf("h1"),
        action="resolve",
        call_id="c1",
        outcome="succeeded",
        value="[" * 5000 + "]" * 5000,
    )
    assert deep.status_code == 400 and "nested more than 100 levels deep" in deep.text
    assert records(site.db, "h1") == before


def test_a_denial_is_final(site: Site) -> None:
    assert site.act("g1", action="deny", call_id="c1").status_code == 303
    assert cli("--db", str(site.db), "resume", "g1") == 0  # the tool never ran; the model was told
    # The run has ended: a later approval is refused, as the CLI refuses it.
    refused = site.act("g1", action="approve", call_id="c1")
    assert refused.status_code == 409
    assert "has ended" in refused.text


def test_behind_a_trusted_proxy_its_header_names_who_acted(db_path: Path) -> None:
    make(db_path, h1=HALTING, h2=HALTING)
    console = Console(db_path, token=TOKEN, operator="ignored", operator_header="X-Forwarded-User")
    with TestClient(console) as c:
        c.get("/?token=" + TOKEN)
        site = Site(c, db_path)
        ok = site.client.post(
            "/act?id=h1",
            files={
                "csrf": (None, site.csrf("h1")),
                "action": (None, "resolve"),
                "call_id": (None, "c1"),
                "outcome": (None, "not_executed"),
            },
            headers={"X-Forwarded-User": "carol@example.com"},
            follow_redirects=False,
        )
        assert ok.status_code == 303
        assert records(db_path, "h1")[-1][2]["resolved"]["by"] == "carol@example.com"
        before = records(db_path, "h2")
        nobody = site.post(
            "/act?id=h2", csrf=site.csrf("h2"), action="cancel"
        )  # no header: nobody is named, so nothing is done
        assert nobody.status_code == 403
        assert records(db_path, "h2") == before


def test_pages_of_runs_follow_each_other_without_gaps_or_repeats(db_path: Path) -> None:
    make(db_path, **{f"r{i}": HALTING for i in range(5)}, d1="tests.cli.agents:agent")
    seen: list[str] = []
    for status in (None, "halted"):
        seen = []
        with TestClient(Console(db_path, token=TOKEN, page_size=2)) as c:
            c.get("/?token=" + TOKEN)
            url = "/" + (f"?status={status}" if status else "")
            while url:
                page = c.get(url).text
                seen.extend(re.findall(r"<tr data-run-id='([^']+)'", page))
                older = re.search(r"id=older href='\./([^']*)'", page)
                url = "/" + older.group(1).replace("&amp;", "&") if older else ""
        expected = [f"r{i}" for i in reversed(range(5))]
        assert seen == (expected if status else ["d1", *expected])


def test_an_unknown_status_filter_is_a_bad_request(site: Site) -> None:
    assert site.client.get("/?status=<b>").status_code == 400


def test_the_console_mounted_under_a_prefix_links_within_it(db_path: Path) -> None:
    make(db_path, h1=HALTING)
    service = Starlette(routes=[Mount("/ops/console", app=Console(db_path, token=TOKEN))])
    with TestClient(service) as c:
        traded = c.get("/ops/console/?token=" + TOKEN, follow_redirects=False)
        assert traded.headers["location"] == "/ops/console/"
        assert "path=/ops/console" in traded.headers["set-cookie"].lower()
        listing = c.get("/ops/console/")
        assert listing.status_code == 200
        link = re.search(r"href='(run\?id=h1)'", listing.text)
        assert link is not None
        assert c.get("/ops/console/" + link.group(1)).status_code == 200
        assert c.get("/ops/console/static/console.css").status_code == 200


def test_a_run_id_full_of_markup_and_url_syntax_is_listed_linked_and_escaped(db_path: Path) -> None:
    odd = "<b>x</b>&y='1' z?id=2#"
    cli("--db", str(db_path), "run", "--run-id", odd, "--agent", HALTING, "go")
    with TestClient(Console(db_path, token=TOKEN, operator="alice")) as c:
        c.get("/?token=" + TOKEN)
        listing = c.get("/").text
        assert "<b>x</b>" not in listing and "&lt;b&gt;x&lt;/b&gt;" in listing
        link = re.search(r"class=run-id href='([^']+)'", listing)
        assert link is not None
        page = c.get("/" + html.unescape(link.group(1)))
        assert page.status_code == 200
        assert (
            "<code id=run-id>&lt;b&gt;x&lt;/b&gt;&amp;y=&#x27;1&#x27; z?id=2#</code>" in page.text
        )
        site = Site(c, db_path)
        token = site.csrf(odd)
        done = c.post(
            "/act?" + urlencode({"id": odd}),
            files={"csrf": (None, token), "action": (None, "cancel")},
            follow_redirects=False,
        )
        assert done.status_code == 303
    assert records(db_path, odd)[-1][1] == "cancel"


def test_content_blocks_in_a_result_are_shown_as_the_text_they_say(db_path: Path) -> None:
    make(db_path, b1="tests.console.agents:blocks")
    with TestClient(Console(db_path, token=TOKEN)) as c:
        page = c.get("/run?id=b1", headers={"Authorization": f"Bearer {TOKEN}"}).text
    shown = re.search(r"<pre class=content>(.*?)</pre>", page, re.DOTALL)
    assert shown is not None
    assert shown.group(1) == (
        "2 hits for refund:\n&lt;b&gt;refunds&lt;/b&gt; take 5 days\n[image image/png]"
    )


def test_a_call_in_flight_is_shown_running_and_its_resolution_is_refused(db_path: Path) -> None:
    """A marker written under the lease of a live owner (this process) is a call in flight."""
    import asyncio

    from runtime import Journal, Owner
    from runtime import records as R
    from runtime.messages import AssistantTurn, ToolCall

    async def in_flight() -> None:
        async with Journal(db_path) as journal:
            store = journal.store
            lease = await store.acquire("live", Owner.here(), ttl=600)
            await store.create_run("live", epoch=lease.epoch)
            turn = AssistantTurn(tool_calls=(ToolCall("c1", "charge", {}),))
            payloads = [
                (R.START, R.START, {"input": "go", "spec": HALTING}),
                (R.turn_key(1), R.TURN, {"n": 1, "turn": turn.to_json(), "plan": {}}),
                (R.attempt_key("c1", 1), R.ATTEMPT, {"call_id": "c1", "attempt": 1}),
            ]
            for key, kind, payload in payloads:
                await store.append("live", key, kind, {**payload, "epoch": lease.epoch})

    asyncio.run(in_flight())
    with TestClient(Console(db_path, token=TOKEN, operator="alice")) as c:
        assert c.get("/?token=" + TOKEN).status_code == 200
        site = Site(c, db_path)
        page = c.get("/run?id=live").text
        assert "in flight: <code>c1</code> charge" in page and "driven now by process" in page
        assert "name=outcome" not in page  # no resolution form for it
        listing = c.get("/").text
        assert "in flight c1 charge" in listing
        before = records(db_path, "live")
        form = {"action": "resolve", "call_id": "c1", "outcome": "not_executed"}
        refused = site.post("/act?id=live", csrf=site.csrf("live"), **form)
        assert refused.status_code == 409 and "is still running in process" in refused.text
        assert records(db_path, "live") == before


def test_a_run_with_an_unreadable_record_is_listed_as_such_and_the_others_still_are(
    db_path: Path,
) -> None:
    """The console lists runs as `list` does (runtime.runs): one damaged record costs its own
    run, named, and the table still shows every other run."""
    make(db_path, h1=HALTING, bad=HALTING)
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE bide_records SET payload = '{oops' WHERE run_id = 'bad' AND key = 'turn/1'"
        )
    with TestClient(Console(db_path, token=TOKEN)) as c:
        c.get("/?token=" + TOKEN)
        for url in ("/", "/?status=halted", "/?status=unreadable"):
            page = c.get(url)
            assert page.status_code == 200, url
            assert "<tr data-run-id='bad' data-status='unreadable'>" in page.text, url
            assert "record &#x27;turn/1&#x27; of run &#x27;bad&#x27;" in page.text, url
        assert "<tr data-run-id='h1' data-status='halted'>" in c.get("/?status=halted").text


def test_a_cancelled_run_keeps_showing_the_call_that_may_have_acted(db_path: Path) -> None:
    make(db_path, h1=HALTING)
    cli("--db", str(db_path), "cancel", "h1", "--reason", "no longer needed")
    with TestClient(Console(db_path, token=TOKEN)) as c:
        c.get("/?token=" + TOKEN)
        row = re.search(r"<tr data-run-id='h1'.*?</tr>", c.get("/").text, re.S)
        assert row is not None
        assert "data-status='cancelled'" in row.group(0)
        assert "halted c" in row.group(0)


def _form_fields(page: str, css: str) -> dict[str, str]:
    """The hidden fields of the page's form of class ``css`` (what a browser would post)."""
    found = re.search(rf"<form [^>]*class='?[^>]*\b{css}\b[^>]*>(.*?)</form>", page, re.DOTALL)
    assert found is not None, f"no {css} form"
    fields = dict(re.findall(r"<input type=hidden name='?([\w-]+)'? value='([^']*)'>", found[1]))
    return {k: html.unescape(v) for k, v in fields.items()}


def test_a_confirm_shown_for_attempt_1_is_refused_once_attempt_2_halted(db_path: Path) -> None:
    """Two operators open the halted call (attempt 1); one confirms "not executed", a worker
    runs attempt 2, which halts; the other's confirm, for the attempt its page showed, is
    refused naming attempt 2, and records nothing that would let attempt 3 charge again."""
    make(db_path, h1=HALTING)
    with (
        TestClient(Console(db_path, token=TOKEN, operator="alice")) as alice,
        TestClient(Console(db_path, token=TOKEN, operator="bob")) as bob,
    ):
        confirms = {}
        for name, client in (("alice", alice), ("bob", bob)):
            assert client.get("/?token=" + TOKEN).status_code == 200
            page = client.get("/run?id=h1").text
            assert "attempt 1 was marked" in page
            form = _form_fields(page, "resolve-not-executed")
            assert form["attempt"] == "1"
            shown = client.post("/confirm?id=h1", files={k: (None, v) for k, v in form.items()})
            assert shown.status_code == 200
            assert "resolve attempt 1 of call c1 (charge) of run h1 as not executed" in shown.text
            confirms[name] = _form_fields(shown.text, "confirm")
        files = {k: (None, v) for k, v in confirms["alice"].items()}
        done = alice.post("/act?id=h1", files=files, follow_redirects=False)
        assert done.status_code == 303
        assert cli("--db", str(db_path), "resume", "h1") == 4  # attempt 2 was sent and halted
        before = records(db_path, "h1")

        files = {k: (None, v) for k, v in confirms["bob"].items()}
        late = bob.post("/act?id=h1", files=files, follow_redirects=False)
        assert late.status_code == 409
        assert "the call is on attempt 2 now" in html.unescape(late.text)
        assert records(db_path, "h1") == before
        assert cli("--db", str(db_path), "resume", "h1") == 4  # still halted on attempt 2
        attempts = [key for key, kind, _ in records(db_path, "h1") if kind == "attempt"]
        assert attempts == ["attempt/c1/1", "attempt/c1/2"]
        page = bob.get("/run?id=h1").text
        assert "attempt 2 was marked" in page
        assert _form_fields(page, "resolve-not-executed")["attempt"] == "2"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_run_id_or_filter_with_a_nul_is_a_bad_request_on_either_backend(
    request: pytest.FixtureRequest, backend: str, db_path: Path
) -> None:
    where = request.getfixturevalue("pg_url") if backend == "postgres" else db_path
    if backend == "sqlite":
        make(db_path, h1=HALTING)
    with TestClient(Console(where, token=TOKEN), raise_server_exceptions=False) as c:
        c.get("/?token=" + TOKEN)
        for path in ("/run?id=%00", "/run?id=a%00b", "/?prefix=%00", "/?before=1:%00"):
            page = c.get(path)
            assert page.status_code == 400, (path, page.status_code)
            assert "NUL" in html.unescape(page.text), page.text
        refused = c.post("/act?id=%00", files={"csrf": (None, "x"), "action": (None, "cancel")})
        assert refused.status_code in (400, 403), refused.status_code
