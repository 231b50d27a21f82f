"""The chart of halts and waits by age, drawn by the server as inline SVG (no script needed)."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.console.html import Html
from runtime.runs import Row

__all__ = ["BUCKETS", "ages", "chart"]

BUCKETS: tuple[tuple[str, int], ...] = (
    ("< 5 min", 5 * 60_000),
    ("< 1 h", 3_600_000),
    ("< 1 day", 86_400_000),
    ("< 1 week", 7 * 86_400_000),
    ("older", 2**62),
)
"""Age buckets, each with its upper bound in milliseconds."""


def ages(rows: Sequence[Row], now_ms: int) -> dict[str, list[int]]:
    """Halted and waiting runs counted per age bucket: ``{"halted": [n, ...], "waiting": [...]}``.

    A halted run's age is its oldest unresolved attempt's; a waiting run's is its last update's.
    """
    counts = {"halted": [0] * len(BUCKETS), "waiting": [0] * len(BUCKETS)}
    for row in rows:
        if row.status == "halted":
            times = [s.attempted_at_ms for s in row.halted if s.attempted_at_ms is not None]
            since = min(times) if times else row.updated_ms
        elif row.status == "waiting":
            since = row.updated_ms
        else:
            continue
        age = max(now_ms - since, 0)
        index = next(i for i, (_, bound) in enumerate(BUCKETS) if age < bound)
        counts[row.status][index] += 1
    return counts


def chart(counts: dict[str, list[int]]) -> Html:
    """Grouped bars, halted beside waiting, one group per age bucket, with counts written on."""
    width, height, top, bottom, left = 520, 170, 16, 34, 28
    plot = height - top - bottom
    group = (width - left) / len(BUCKETS)
    bar = group / 3
    peak = max([1, *counts["halted"], *counts["waiting"]])
    parts = [
        Html(
            "<svg class=chart role=img viewBox='0 0 {w} {h}' width='{w}' height='{h}' "
            "aria-labelledby=chart-title><title id=chart-title>halted and waiting runs by age"
            "</title>"
        ).format(w=width, h=height),
        Html("<line class=axis x1='{x}' y1='{y}' x2='{w}' y2='{y}'/>").format(
            x=left, y=top + plot, w=width
        ),
    ]
    for i, (label, _) in enumerate(BUCKETS):
        x0 = left + i * group + bar / 2
        for j, series in enumerate(("halted", "waiting")):
            n = counts[series][i]
            h = plot * n / peak
            x = x0 + j * bar
            y = top + plot - h
            parts.append(
                Html(
                    "<rect class='bar bar-{s}' x='{x:.1f}' y='{y:.1f}' width='{bw:.1f}' "
                    "height='{bh:.1f}'><title>{n} {s}, {label}</title></rect>"
                ).format(s=series, x=x, y=y, bw=bar - 2, bh=h, n=n, label=label)
            )
            if n:
                parts.append(
                    Html("<text class=count x='{x:.1f}' y='{y:.1f}'>{n}</text>").format(
                        x=x + (bar - 2) / 2, y=y - 3, n=n
                    )
                )
        parts.append(
            Html("<text class=label x='{x:.1f}' y='{y}'>{label}</text>").format(
                x=x0 + bar, y=height - bottom + 16, label=label
            )
        )
    legend_y = height - 6
    parts.append(
        Html(
            "<rect class='key key-halted' x='{x}' y='{y}' width='10' height='10'/>"
            "<text class=legend x='{tx}' y='{ty}'>halted</text>"
            "<rect class='key key-waiting' x='{x2}' y='{y}' width='10' height='10'/>"
            "<text class=legend x='{tx2}' y='{ty}'>waiting</text>"
        ).format(x=left, y=legend_y - 9, tx=left + 14, ty=legend_y, x2=left + 80, tx2=left + 94)
    )
    parts.append(Html("</svg>"))
    return Html("".join(parts))
