"""HTML built by escaping every value by default: only ``Html`` passes through untouched."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

__all__ = ["Html", "attr_json", "esc", "join", "page", "run_href", "when"]


class Html(str):
    """Markup already escaped (or written by the console itself): ``esc`` leaves it alone."""

    __slots__ = ()

    def format(self, *args: Any, **kwargs: Any) -> Html:
        """Like ``str.format``, but every argument that is not ``Html`` or a number is escaped."""
        return Html(
            super().format(*(_arg(a) for a in args), **{k: _arg(v) for k, v in kwargs.items()})
        )

    def __add__(self, other: str) -> Html:
        return Html(str.__add__(self, esc(other)))


def _arg(value: Any) -> Any:
    # Numbers keep their type so format specs such as ``{x:.1f}`` work; they need no escaping.
    return value if isinstance(value, int | float) else esc(value)


def esc(value: Any) -> Html:
    """``value`` as HTML text: ``Html`` unchanged, anything else stringified and escaped."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[Any], sep: str = "") -> Html:
    """Parts joined as HTML, each escaped unless it is ``Html``."""
    return Html(sep.join(esc(p) for p in parts))


def attr_json(value: Any) -> str:
    """A value as indented JSON text (escaped later, wherever it is put)."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def page(title: str, body: Html, *, nav: Html | None = None) -> Html:
    """A whole page: no inline script or style (the Content-Security-Policy forbids both)."""
    return Html(
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        "<title>{title}</title>"
        "<link rel=stylesheet href='static/console.css'>"
        "<link rel=icon href='static/favicon.svg' type='image/svg+xml'>"
        "<script src='static/console.js' defer></script>"
        "</head><body><header><a class=brand href='./'>bide console</a>{nav}</header>"
        "<main>{body}</main></body></html>\n"
    ).format(title=title, nav=nav or Html(""), body=body)


def run_href(run_id: str) -> str:
    """The console's link to a run's page."""
    return "run?" + urlencode({"id": run_id})


def when(ms: int | None) -> str:
    """A moment as local date and time, or ``""``."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
