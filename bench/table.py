"""Issue 15's table as `bench/steps.py` prints it: one row per workload, bide's figure then and
now, the ratio to the anchor measured beside it, the goal, and whether it is met."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import NamedTuple


class Row(NamedTuple):
    workload: str
    then: str
    """What issue 15 measured (beside LangGraph and DBOS)."""
    now: str
    ratio: str
    goal: str
    met: str


def span(xs: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """Median (min-max) of repeated samples."""
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def met(value: float, goal: float) -> str:
    return "yes" if value <= goal else "no"


def render(rows: Sequence[Row]) -> str:
    lines = [
        "| workload | issue 15 (then) | bide now | ratio to its anchor | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
