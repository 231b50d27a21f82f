"""The console's pages, as HTML: the runs table, a run's timeline with what can be done about it
(its forms are in ``console.forms``), and the error page."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from runtime.console.chart import chart
from runtime.console.forms import cancel_form, in_flight, stop_forms
from runtime.console.html import Html, attr_json, join, page, run_href, when
from runtime.console.status import STATUSES, badge
from runtime.messages import AssistantTurn
from runtime.runs import Page, Row
from runtime.telling import Event
from runtime.timeline import Timeline
from runtime.tree import Family, Kin

__all__ = [
    "durations",
    "error_page",
    "resume_command",
    "run_page",
    "runs_page",
    "session_page",
    "sessions_page",
]


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
        "<th>tokens</th><th>last update</th><th>stopped on</th></tr></thead>"
        "<tbody>{rows}</tbody></table>"
        "<nav class=pages>{nav}</nav></section>"
    ).format(filters=filters, chart=chart(counts), rows=join(rows), nav=join(nav, " "))
    links = Html(
        " <a class=nav href='sessions'>sessions</a> <a class=nav href='schedules'>schedules</a>"
    )
    return page("bide: runs", body, nav=links)


def _row(row: Row, now_ms: int) -> Html:
    stops = join(
        Html("<div>{s}</div>").format(s=s.brief())
        for s in (*row.in_flight, *row.halted, *row.waiting)
    )
    if row.unreadable is not None:
        stops = Html("<div class=unreadable>{why}</div>").format(why=row.unreadable)
    return Html(
        "<tr data-run-id='{rid}' data-status='{status}'><td>{link}</td><td>{badge}</td>"
        "<td>{agent}</td><td class=num>{turns}</td><td class=num>{tokens}</td>"
        "<td title='{when}'>{age}</td><td>{stops}</td></tr>"
    ).format(
        rid=row.run_id,
        status=row.status,
        link=_run_link(row.run_id),
        badge=badge(row.status),
        agent=row.agent or "",
        turns=row.turns,
        tokens=row.usage.total_tokens,
        when=when(row.updated_ms),
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
    family: Family | None = None,
) -> Html:
    facts = [
        Html("<dt>status</dt><dd id=run-status>{b}</dd>").format(b=badge(tl.status)),
        Html("<dt>agent</dt><dd>{a}</dd>").format(a=tl.agent or "?"),
    ]
    if tl.spec:
        facts.append(Html("<dt>spec</dt><dd><code>{s}</code></dd>").format(s=tl.spec))
    if tl.session is not None:
        name = str(tl.session.get("id"))
        facts.append(
            Html("<dt>session</dt><dd><a href='sessions?{q}'>{s}</a> (message {k})</dd>").format(
                q=urlencode({"name": name}), s=name, k=str(tl.session.get("k"))
            )
        )
    facts.append(Html("<dt>turns</dt><dd>{n}</dd>").format(n=tl.turns))
    if tl.usage.input_tokens or tl.usage.output_tokens:
        facts.append(
            Html("<dt>tokens</dt><dd>{i} in / {o} out</dd>").format(
                i=tl.usage.input_tokens, o=tl.usage.output_tokens
            )
        )
    if tl.usage.cost is not None:
        facts.append(Html("<dt>cost</dt><dd>{c}</dd>").format(c=f"{tl.usage.cost:g}"))
    facts.append(Html("<dt>input</dt><dd><pre>{v}</pre></dd>").format(v=_text(tl.input)))
    if tl.output is not None:
        output = tl.output  # the text, or a typed output's JSON
        shown = output if isinstance(output, str) else json.dumps(output, indent=2)
        facts.append(Html("<dt>output</dt><dd><pre>{v}</pre></dd>").format(v=shown))
    if tl.error is not None:
        facts.append(Html("<dt>error</dt><dd><pre>{v}</pre></dd>").format(v=_text(tl.error)))
    notes = []
    if message:
        notes.append(Html("<p class=done role=status id=message>{m}</p>").format(m=message))
    if error:
        notes.append(
            Html("<p class=refused role=alert id=refusal>refused: {m}</p>").format(m=error)
        )
    stops = [in_flight(tl, s) for s in tl.in_flight]
    stops += [stop_forms(tl, s, csrf, operator) for s in (*tl.halted, *tl.waiting)]
    ended = any(e.kind == "end" for e in tl.events)
    if not ended and tl.status != "cancelled":
        stops.append(cancel_form(tl.run_id, csrf))
    if tl.driven and (lease := tl.lease) is not None:
        notes.append(
            Html(
                "<p class=next id=driven>driven now by {who}; its lease lasts until {until}</p>"
            ).format(who=lease.owner.describe(), until=when(lease.wall_ms(lease.expires_ms)))
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
        "<section class=actions>{stops}</section>{tree}"
        "<h2>timeline</h2><section id=live-region data-refresh data-events='{events_href}'>"
        "<table id=timeline><thead><tr><th>at</th><th>record</th><th>what</th></tr></thead>"
        "<tbody>{events}</tbody></table></section>"
    ).format(
        rid=tl.run_id,
        notes=join(notes),
        facts=join(facts),
        stops=join(stops),
        events=events,
        tree=_tree(family),
        # Only what comes after the records this page shows.
        events_href="events?"
        + urlencode({"id": tl.run_id, "after": max((e.seq for e in tl.events), default=0)}),
    )
    return page(f"bide: run {tl.run_id}", body)


def _tree(family: Family | None) -> Html:
    """The run's parent and children (``runtime.children``), each linked, with its status."""
    if family is None or (family.parent is None and not family.children):
        return Html("")

    def kin(k: Kin) -> Html:
        return Html(
            "<li data-run-id='{rid}'><a href='{href}'><code>{rid}</code></a> {badge} "
            "(call <code>{call}</code>)</li>"
        ).format(rid=k.run_id, href=run_href(k.run_id), badge=badge(k.status), call=k.call_id)

    parts = []
    if family.parent is not None:
        parts.append(Html("<h2>parent</h2><ul id=parent>{p}</ul>").format(p=kin(family.parent)))
    if family.children:
        more = Html("<li>(more not shown)</li>") if family.more else Html("")
        parts.append(
            Html("<h2>children</h2><ul id=children>{c}{more}</ul>").format(
                c=join(kin(k) for k in family.children), more=more
            )
        )
    return join(parts)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else attr_json(value)


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
        when=when(e.at_ms),
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


def error_page(title: str, text: str, *, links: Sequence[tuple[str, str]] = ()) -> Html:
    nav = join(Html("<a href='{h}'>{t}</a>").format(h=h, t=t) for h, t in links)
    return page(
        f"bide: {title}",
        Html("<h1>{t}</h1><p>{x}</p><p>{nav}</p>").format(t=title, x=text, nav=nav),
    )


def sessions_page(found: Sequence[Mapping[str, Any]]) -> Html:
    """The journal's sessions, each with its last run and that run's status."""
    rows = [
        Html(
            "<tr><td><a href='sessions?{q}'>{name}</a></td><td class=num>{n}</td>"
            "<td>{last}</td><td>{badge}</td></tr>"
        ).format(
            q=urlencode({"name": s["session"]}),
            name=s["session"],
            n=s["messages"],
            last=_run_link(s["last_run"]) if s["last_run"] else Html(""),
            badge=badge(s["status"]) if s["status"] else Html(""),
        )
        for s in found
    ]
    body = Html(
        "<h1>Sessions</h1><table id=sessions><thead><tr><th>session</th><th>messages</th>"
        "<th>last run</th><th>its status</th></tr></thead><tbody>{rows}</tbody></table>"
    ).format(rows=join(rows))
    return page("bide: sessions", body)


def session_page(name: str, runs: Sequence[Mapping[str, Any]]) -> Html:
    """One session's runs, in order: a session runs one message at a time."""
    rows = [
        Html(
            "<tr><td class=num>{k}</td><td>{link}</td><td>{badge}</td><td class=num>{turns}</td>"
            "</tr>"
        ).format(k=r["k"], link=_run_link(r["run_id"]), badge=badge(r["status"]), turns=r["turns"])
        for r in runs
    ]
    body = Html(
        "<h1>Session {name}</h1><table id=session-runs><thead><tr><th>#</th><th>run id</th>"
        "<th>status</th><th>turns</th></tr></thead><tbody>{rows}</tbody></table>"
    ).format(name=name, rows=join(rows))
    return page(f"bide: session {name}", body)
