"""The console's forms: what an operator can do about a call the run is stopped on (resolve,
approve, answer), cancel, and the confirmation page every action passes through."""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from runtime.console.actions import Preview
from runtime.console.html import Html, attr_json, join, page, run_href, when
from runtime.stops import Stop
from runtime.terminal import clip
from runtime.timeline import Timeline
from runtime.tools import idempotency_key_for

__all__ = ["cancel_form", "confirm_page", "csrf_input", "in_flight", "stop_forms"]


def csrf_input(token: str) -> Html:
    return Html("<input type=hidden name=csrf value='{t}'>").format(t=token)


def _form(run_id: str, csrf: str, fields: Html, button: str, *, css: str = "") -> Html:
    return Html(
        "<form method=post action='confirm?{q}' class='action {css}' "
        "enctype=multipart/form-data>{csrf}{fields}<button type=submit>{button}</button></form>"
    ).format(
        q=urlencode({"id": run_id}), css=css, csrf=csrf_input(csrf), fields=fields, button=button
    )


def _hidden(**fields: str) -> Html:
    return join(
        Html("<input type=hidden name='{k}' value='{v}'>").format(k=k, v=v)
        for k, v in fields.items()
    )


def in_flight(tl: Timeline, stop: Stop) -> Html:
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
        when=when(stop.attempted_at_ms),
    )


def stop_forms(tl: Timeline, stop: Stop, csrf: str, operator: str | None) -> Html:
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
        n = str(stop.attempt or 1)  # the attempt shown: a resolution from this page judges it
        head += Html(
            "<p>attempt {n} was marked at {when} and has no result: it may have acted. Find out "
            "(the provider's records, by the call's idempotency key <code class=key>{key}</code>), "
            "then say what happened.</p>"
        ).format(
            n=n,
            when=when(stop.attempted_at_ms),
            key=idempotency_key_for(tl.run_id, cid),
        )
        forms.append(
            _form(
                tl.run_id,
                csrf,
                _hidden(action="resolve", call_id=cid, attempt=n, outcome="succeeded")
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
                _hidden(action="resolve", call_id=cid, attempt=n, outcome="failed")
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
                _hidden(action="resolve", call_id=cid, attempt=n, outcome="not_executed")
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
    elif stop.kind == "timer":
        head += Html("<p>sleeps until {at}: a worker drives the run again then</p>").format(
            at=stop.due_at or "?"
        )
    elif stop.kind == "signal":
        until = f" (until {stop.due_at}, then its receive times out)" if stop.due_at else ""
        head += Html("<p>waits for a signal <code>{name}</code>{until}</p>").format(
            name=stop.signal or "", until=until
        )
        if stop.arrived:
            head += Html("<p class=decided>one came: the next drive gives it to the tool</p>")
        forms.append(
            _form(
                tl.run_id,
                csrf,
                # Its id is made with the form: submitted twice, it is one signal.
                _hidden(action="signal", name=stop.signal or "", signal_id=uuid.uuid4().hex)
                + Html(
                    "<label>value (JSON) <textarea name=value class=signal-value required>"
                    "</textarea></label>"
                ),
                "send signal…",
                css="signal",
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


def cancel_form(run_id: str, csrf: str) -> Html:
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
        csrf=csrf_input(csrf),
        hidden=hidden,
    )
    return page("bide: confirm", body)
