"""The console's pages, as HTML: the runs table, a run's timeline and actions, confirmations."""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from runtime.console.actions import Preview
from runtime.console.chart import chart
from runtime.console.html import Html, attr_json, join, page
from runtime.console.runs import Page, Row
from runtime.console.status import STATUSES, badge
from runtime.messages import AssistantTurn
from runtime.stops import Stop
from runtime.telling import Event
from runtime.terminal import clip
from runtime.timeline import Timeline
from runtime.tools import idempotency_key_for

__all__ = ["confirm_page", "error_page", "run_page", "runs_page"]


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _age(ms: int, now_ms: int) -> str:
    s = max(now_ms - ms, 0) // 1000
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    if s < 86400:
        return f"{s // 3600}h ago"
    return f"{s // 86400}d ago"


def _run_link(run_id: str) -> Html:
    return Html("<a class=run-id href='{href}'>{run_id}</a>").format(
        href=run_href(run_id), run_id=run_id
    )


def run_href(run_id: str) -> str:
    return "run?" + urlencode({"id": run_id})


def _csrf(token: str) -> Html:
    return Html("<input type=hidden name=csrf value='{t}'>").format(t=token)


def runs_page(
    listing: Page,
    *,
    status: str | None,
    prefix: str | None,
    before: str | None,
    counts: dict[str, list[int]],
    now_ms: int,
) -> Html:
    options = [Html("<option value=''>any status</option>")]
    for word in STATUSES:
        options.append(
            Html("<option value='{w}'{sel}>{w}</option>").format(
                w=word, sel=Html(" selected") if word == status else Html("")
            )
        )
    filters = Html(
        "<form class=filters method=get action='./'>"
        "<label>status <select name=status id=status>{options}</select></label> "
        "<label>run id starts with <input name=prefix id=prefix value='{prefix}'></label> "
        "<button type=submit>filter</button> "
        "<label class=live><input type=checkbox id=live checked> live refresh</label>"
        "</form>"
    ).format(options=join(options), prefix=prefix or "")
    rows = []
    for row in listing.rows:
        rows.append(_row(row, now_ms))
    if not rows:
        rows.append(Html("<tr><td colspan=6 class=empty>no runs</td></tr>"))
    nav = []
    query = {k: v for k, v in (("status", status), ("prefix", prefix)) if v}
    if before:
        nav.append(Html("<a href='./?{q}'>newest</a>").format(q=urlencode(query)))
    if listing.next_cursor:
        nav.append(
            Html("<a rel=next id=older href='./?{q}'>older runs</a>").format(
                q=urlencode({**query, "before": listing.next_cursor})
            )
        )
    body = Html(
        "<h1>Runs</h1>{filters}"
        "<section id=live-region data-refresh>"
        "<figure class=chart-box><figcaption>halted and waiting runs, by how long they have "
        "been stopped</figcaption>{chart}</figure>"
        "<table id=runs><thead><tr><th>run id</th><th>status</th><th>agent</th><th>turns</th>"
        "<th>last update</th><th>stopped on</th></tr></thead><tbody>{rows}</tbody></table>"
        "<nav class=pages>{nav}</nav></section>"
    ).format(filters=filters, chart=chart(counts), rows=join(rows), nav=join(nav, " "))
    return page("bide: runs", body)


def _row(row: Row, now_ms: int) -> Html:
    stops = join(
        Html("<div>{s}</div>").format(s=s.brief())
        for s in (*row.in_flight, *row.halted, *row.waiting)
    )
    return Html(
        "<tr data-run-id='{rid}' data-status='{status}'><td>{link}</td><td>{badge}</td>"
        "<td>{agent}</td><td class=num>{turns}</td>"
        "<td title='{when}'>{age}</td><td>{stops}</td></tr>"
    ).format(
        rid=row.run_id,
        status=row.status,
        link=_run_link(row.run_id),
        badge=badge(row.status),
        agent=row.agent or "",
        turns=row.turns,
        when=_when(row.updated_ms),
        age=_age(row.updated_ms, now_ms),
        stops=stops,
    )


def run_page(
    tl: Timeline,
    *,
    csrf: str,
    operator: str | None,
    message: str | None = None,
    error: str | None = None,
) -> Html:
    facts = [
        Html("<dt>status</dt><dd id=run-status>{b}</dd>").format(b=badge(tl.status)),
        Html("<dt>agent</dt><dd>{a}</dd>").format(a=tl.agent or "?"),
    ]
    if tl.spec:
        facts.append(Html("<dt>spec</dt><dd><code>{s}</code></dd>").format(s=tl.spec))
    facts.append(Html("<dt>turns</dt><dd>{n}</dd>").format(n=tl.turns))
    if tl.usage.input_tokens or tl.usage.output_tokens:
        facts.append(
            Html("<dt>tokens</dt><dd>{i} in / {o} out</dd>").format(
                i=tl.usage.input_tokens, o=tl.usage.output_tokens
            )
        )
    facts.append(Html("<dt>input</dt><dd><pre>{v}</pre></dd>").format(v=_text(tl.input)))
    if tl.output is not None:
        facts.append(Html("<dt>output</dt><dd><pre>{v}</pre></dd>").format(v=tl.output))
    if tl.error is not None:
        facts.append(Html("<dt>error</dt><dd><pre>{v}</pre></dd>").format(v=_text(tl.error)))
    notes = []
    if message:
        notes.append(Html("<p class=done role=status id=message>{m}</p>").format(m=message))
    if error:
        notes.append(
            Html("<p class=refused role=alert id=refusal>refused: {m}</p>").format(m=error)
        )
    stops = [_in_flight(tl, s) for s in tl.in_flight]
    stops += [_stop(tl, s, csrf, operator) for s in (*tl.halted, *tl.waiting)]
    ended = any(e.kind == "end" for e in tl.events)
    if not ended and tl.status != "cancelled":
        stops.append(_cancel_form(tl.run_id, csrf))
    if tl.driven and tl.lease is not None:
        notes.append(
            Html(
                "<p class=next id=driven>driven now by {who}; its lease lasts until {until}</p>"
            ).format(who=tl.lease.owner.describe(), until=_when(tl.lease.expires_ms))
        )
    idle = tl.status in ("orphaned", "submitted", "cancelled") and not tl.driven
    if not ended and (idle or (_decided(tl) and not tl.driven)):
        notes.append(
            Html(
                "<p class=next id=next>nothing here holds it any more: resume it "
                "(<code>{command}</code>), or let a worker</p>"
            ).format(command=resume_command(tl.run_id))
        )
    origin = tl.started_ms or 0
    took = durations(tl)
    events = join(_event(e, origin, took.get(e.seq)) for e in tl.events)
    body = Html(
        "<p><a href='./'>&larr; runs</a></p><h1>run <code id=run-id>{rid}</code></h1>{notes}"
        "<dl class=facts>{facts}</dl>"
        "<section class=actions>{stops}</section>"
        "<h2>timeline</h2><section id=live-region data-refresh>"
        "<table id=timeline><thead><tr><th>at</th><th>record</th><th>what</th></tr></thead>"
        "<tbody>{events}</tbody></table></section>"
    ).format(rid=tl.run_id, notes=join(notes), facts=join(facts), stops=join(stops), events=events)
    return page(f"bide: run {tl.run_id}", body)


def resume_command(run_id: str) -> str:
    return f"python -m runtime resume {shlex.quote(run_id)}"


def _decided(tl: Timeline) -> bool:
    """Every stop is a gate whose tally is final: the next drive opens or closes it."""
    gates = [s for s in tl.waiting if s.kind == "approval"]
    return (
        not tl.halted
        and len(gates) == len(tl.waiting) > 0
        and all((s.tally or {}).get("outcome") in ("approved", "denied") for s in gates)
    )


def durations(tl: Timeline) -> dict[int, int]:
    """How long each call took, by its result's seq: from its attempt marker (a side effect) or
    from the turn that asked for it, to its result. Resolutions are left out (a person's time)."""
    asked: dict[str, int] = {}
    marked: dict[tuple[str, object], int] = {}
    took: dict[int, int] = {}
    for e in tl.events:
        p = e.payload
        if not isinstance(p, Mapping):
            continue
        if e.kind == "turn":
            for call in AssistantTurn.from_json(p.get("turn") or {}).tool_calls:
                asked.setdefault(call.id, e.at_ms)
        elif e.kind == "attempt" and e.call_id is not None:
            marked[(e.call_id, p.get("attempt"))] = e.at_ms
        elif e.kind == "result" and e.call_id is not None and not p.get("resolved"):
            start = marked.get((e.call_id, p.get("attempt")), asked.get(e.call_id))
            if start is not None:
                took[e.seq] = max(e.at_ms - start, 0)
    return took


def _event(e: Event, origin: int, took: int | None = None) -> Html:
    detail = join(Html("<div>{line}</div>").format(line=line) for line in e.lines)
    if took is not None:
        detail += Html("<div class=took>took {ms} ms</div>").format(ms=took)
    content = _content(e)
    return Html(
        "<tr class='event event-{kind}' data-key='{key}'><td class=num title='{when}'>{at}</td>"
        "<td>{label}</td><td>{detail}{content}<details><summary>record {key}</summary>"
        "<pre>{payload}</pre></details></td></tr>"
    ).format(
        kind=e.kind,
        key=e.key,
        when=_when(e.at_ms),
        at=_offset(e.at_ms - origin),
        label=e.label,
        detail=detail,
        content=content,
        payload=attr_json(e.payload),
    )


def _content(e: Event) -> Html:
    """A result holding MCP content blocks, shown as the text it says."""
    p = e.payload
    if e.kind != "result" or not isinstance(p, Mapping) or p.get("outcome") != "value":
        return Html("")
    blocks = p.get("value")
    if not isinstance(blocks, list) or not blocks:
        return Html("")
    if not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in blocks):
        return Html("")
    parts = []
    for b in blocks:
        if b["type"] == "text":
            parts.append(str(b.get("text", "")))
        elif b["type"] == "resource" and isinstance(b.get("resource"), Mapping):
            r = b["resource"]
            parts.append(str(r.get("text") or f"[resource {r.get('uri')}]"))
        else:
            parts.append(f"[{b['type']} {b.get('mimeType') or b.get('uri') or ''}]".strip())
    return Html("<pre class=content>{t}</pre>").format(t="\n".join(parts))


def _offset(ms: int) -> str:
    if ms < 60_000:
        return f"+{ms / 1000:.3f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"+{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"+{hours}h{minutes:02d}m"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else attr_json(value)


def _form(run_id: str, csrf: str, fields: Html, button: str, *, css: str = "") -> Html:
    return Html(
        "<form method=post action='confirm?{q}' class='action {css}' "
        "enctype=multipart/form-data>{csrf}{fields}<button type=submit>{button}</button></form>"
    ).format(q=urlencode({"id": run_id}), css=css, csrf=_csrf(csrf), fields=fields, button=button)


def _hidden(**fields: str) -> Html:
    return join(
        Html("<input type=hidden name='{k}' value='{v}'>").format(k=k, v=v)
        for k, v in fields.items()
    )


def _in_flight(tl: Timeline, stop: Stop) -> Html:
    """A side effect the live drive is executing: shown, never offered for resolution."""
    return Html(
        "<div class=in-flight><h3>in flight: <code>{cid}</code> {tool}</h3>"
        "<pre class=args>{args}</pre><p>attempt {n} was marked at {when} by the drive that "
        "holds the run now: it is running, and nobody knows its outcome yet. It can be resolved "
        "once that drive has ended or its lease has expired.</p></div>"
    ).format(
        cid=stop.call_id,
        tool=stop.tool,
        args=clip(stop.arguments, 2000),
        n=stop.attempt or 1,
        when=_when(stop.attempted_at_ms),
    )


def _stop(tl: Timeline, stop: Stop, csrf: str, operator: str | None) -> Html:
    head = Html("<h3>{kind}: <code>{cid}</code> {tool}</h3><pre class=args>{args}</pre>").format(
        kind={"halted": "halted", "approval": "needs approval", "input": "asks"}.get(
            stop.kind, stop.kind
        ),
        cid=stop.call_id,
        tool=stop.tool,
        args=clip(stop.arguments, 2000),
    )
    forms: list[Html] = []
    cid = stop.call_id
    if stop.kind == "halted":
        head += Html(
            "<p>attempt {n} was marked at {when} and has no result: it may have acted. Find out "
            "(the provider's records, by the call's idempotency key <code class=key>{key}</code>), "
            "then say what happened.</p>"
        ).format(
            n=stop.attempt or 1,
            when=_when(stop.attempted_at_ms),
            key=idempotency_key_for(tl.run_id, cid),
        )
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="resolve", call_id=cid, outcome="succeeded")
                + Html(
                    "<label>result the model will see (JSON) <textarea name=value "
                    "class=resolve-value required>{}</textarea></label>"
                    "<label>evidence <input name=evidence class=evidence></label>"
                ),
                "resolve: succeeded…",
                css="resolve-succeeded",
            )
        )
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="resolve", call_id=cid, outcome="failed")
                + Html(
                    "<label>error the model will see <input name=error class=resolve-error "
                    "required></label><label>evidence <input name=evidence class=evidence></label>"
                ),
                "resolve: failed…",
                css="resolve-failed",
            )
        )
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="resolve", call_id=cid, outcome="not_executed")
                + Html("<label>evidence <input name=evidence class=evidence></label>"),
                "resolve: not executed…",
                css="resolve-not-executed",
            )
        )
    elif stop.kind == "approval":
        t = stop.tally or {}
        head += Html("<p>tally: {a} of {need} approvals{who}</p>").format(
            a=len(t.get("approvals", ())),
            need=t.get("need", 1),
            who=(": " + ", ".join(map(str, t.get("approvals", ())))) if t.get("approvals") else "",
        )
        if t.get("outcome") in ("approved", "denied"):
            head += Html("<p class=decided>the gate is {o}: the next drive acts on it</p>").format(
                o=t.get("outcome")
            )
            return Html("<article class='stop stop-approval' data-call-id='{cid}'>{head}"
                        "</article>").format(cid=cid, head=head)  # fmt: skip
        forms.append(_form(tl.run_id, csrf, _hidden(action="approve", call_id=cid), "approve…"))
        forms.append(
            _form(tl.run_id, csrf, _hidden(action="deny", call_id=cid), "deny…", css="deny")
        )
        sign = " ".join(
            shlex.quote(w)
            for w in (
                "python", "-m", "runtime", "approve", tl.run_id, cid, "--approver", "ID",
                "--key", "KEY.pem", "--tool", stop.tool, "--arguments",
                attr_json(stop.arguments).replace("\n", " "), "--out", "decision.json",
            )
        )  # fmt: skip
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="signed", call_id=cid)
                + Html(
                    "<p>For a signed gate, sign offline (the console never holds a key):</p>"
                    "<pre class=sign>{sign}</pre>"
                    "<label>paste decision.json <textarea name=decision class=decision>"
                    "</textarea></label><label>or upload it <input type=file name=decision_file "
                    "accept='application/json,.json'></label>"
                ).format(sign=sign),
                "submit signed decision…",
                css="signed",
            )
        )
    else:
        head += Html("<p>question <code>{key}</code>: {prompt}</p>").format(
            key=stop.key or "", prompt=stop.prompt or ""
        )
        schema = _schema(tl, cid, stop.key)
        if schema is not None:
            head += Html(
                "<details class=schema open><summary>the answer must fit</summary>"
                "<pre>{s}</pre></details>"
            ).format(s=attr_json(schema))
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="answer", call_id=cid, key=stop.key or "")
                + Html(
                    "<label>answer (JSON) <textarea name=value class=answer-value required>"
                    "</textarea></label>"
                ),
                "answer…",
                css="answer",
            )
        )
    who = Html("<p class=who>acting as <b>{o}</b></p>").format(o=operator or "nobody named")
    return Html(
        "<article class='stop stop-{kind}' data-call-id='{cid}'>{head}{forms}{who}</article>"
    ).format(kind=stop.kind, cid=cid, head=head, forms=join(forms), who=who)


def _schema(tl: Timeline, call_id: str, key: str | None) -> Any:
    """The JSON schema the tool gave with its question, if it gave one."""
    for e in tl.events:
        p = e.payload
        if (
            e.kind == "interrupt"
            and isinstance(p, Mapping)
            and (p.get("call_id"), p.get("key")) == (call_id, key)
        ):
            return p.get("schema")
    return None


def _cancel_form(run_id: str, csrf: str) -> Html:
    return Html("<article class='stop stop-cancel'><h3>cancel the run</h3>{form}</article>").format(
        form=_form(
            run_id,
            csrf,
            _hidden(action="cancel")
            + Html("<label>reason <input name=reason class=cancel-reason></label>"),
            "cancel…",
            css="cancel",
        )
    )


def confirm_page(run_id: str, preview: Preview, fields: Mapping[str, str], *, csrf: str) -> Html:
    warning = (
        Html("<p class=warning role=alert>{w}</p>").format(w=preview.warning)
        if preview.warning
        else Html("")
    )
    hidden = _hidden(**{k: v for k, v in fields.items() if k not in ("csrf", "decision_file")})
    body = Html(
        "<p><a href='{back}'>&larr; back to the run</a></p><h1>Confirm</h1>"
        "<p id=summary>{summary}</p>{warning}"
        "<p>This record will be appended to the run's journal (kind <code>{kind}</code>):</p>"
        "<pre id=journaled>{payload}</pre>"
        "<form method=post action='act?{q}' class=confirm enctype=multipart/form-data>"
        "{csrf}{hidden}<button type=submit id=confirm>confirm: journal it</button> "
        "<a href='{back}' id=cancel-confirm>no, go back</a></form>"
    ).format(
        back=run_href(run_id),
        summary=preview.summary,
        warning=warning,
        kind=preview.record_kind,
        payload=attr_json(dict(preview.payload)),
        q=urlencode({"id": run_id}),
        csrf=_csrf(csrf),
        hidden=hidden,
    )
    return page("bide: confirm", body)


def error_page(title: str, text: str, *, links: Sequence[tuple[str, str]] = ()) -> Html:
    nav = join(Html("<a href='{h}'>{t}</a>").format(h=h, t=t) for h, t in links)
    return page(
        f"bide: {title}",
        Html("<h1>{t}</h1><p>{x}</p><p>{nav}</p>").format(t=title, x=text, nav=nav),
    )
