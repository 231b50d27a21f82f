"""The console's schedules page: each schedule with its last and next runs, and the queues with
their limits (``runtime.journal.schedules``, ``runtime.journal.queues``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from zoneinfo import ZoneInfo

from runtime.console.html import Html, join, page, run_href, when
from runtime.console.status import badge
from runtime.journal.schedules import ScheduleInfo
from runtime.store.queues import QueueInfo

__all__ = ["schedules_page"]


def _next(info: ScheduleInfo) -> str:
    """The next slot in this server's local time, and in the schedule's own zone."""
    if info.next_slot_ms is None:
        return "-"
    zone = ZoneInfo(info.schedule.tz)
    there = dt.datetime.fromtimestamp(info.next_slot_ms / 1000, zone).strftime("%H:%M:%S")
    return f"{when(info.next_slot_ms)} ({there} {info.schedule.tz})"


def schedules_page(
    schedules: Sequence[ScheduleInfo],
    statuses: Mapping[str, str | None],
    queues: Sequence[QueueInfo],
) -> Html:
    """``statuses``: the status of each schedule's last run (None: no such run, the slot was
    skipped)."""
    rows = []
    for info in schedules:
        s = info.schedule
        last = Html("-")
        if info.last_run is not None:
            status = statuses.get(info.last_run)
            last = Html("<a href='{h}'>{r}</a> {b}").format(
                h=run_href(info.last_run),
                r=info.last_run,
                b=badge(status) if status else Html("(skipped)"),
            )
        rows.append(
            Html(
                "<tr><td>{name}</td><td>{state}</td><td><code>{cron}</code> {tz}</td>"
                "<td>{agent}</td><td>{last}</td><td>{next}</td></tr>"
            ).format(
                name=s.name,
                state="paused" if info.paused else "active",
                cron=s.cron,
                tz=s.tz,
                agent=s.agent,
                last=last,
                next=_next(info),
            )
        )
    queue_rows = [
        Html(
            "<tr><td>{name}</td><td>{limits}</td><td class=num>{active}</td>"
            "<td class=num>{waiting}</td></tr>"
        ).format(
            name=q.name,
            limits=q.limits.describe() if q.limits is not None else "no limits",
            active=q.active,
            waiting=q.waiting,
        )
        for q in queues
    ]
    body = Html(
        "<h1>Schedules</h1>{empty}<table id=schedules><thead><tr><th>schedule</th><th>state</th>"
        "<th>cron</th><th>agent</th><th>last run</th><th>next run</th></tr></thead>"
        "<tbody>{rows}</tbody></table>"
        "<h2>Queues</h2><table id=queues><thead><tr><th>queue</th><th>limits</th>"
        "<th>active</th><th>waiting</th></tr></thead><tbody>{queues}</tbody></table>"
    ).format(
        empty=Html("") if schedules else Html("<p>No schedules.</p>"),
        rows=join(rows),
        queues=join(queue_rows),
    )
    return page("bide: schedules", body)
