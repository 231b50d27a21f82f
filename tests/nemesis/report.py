"""Figures of the nemesis schedules of a session: per family and backend, how many, the most
executions of one call (maxFired), violations, and time; printed at the end of the session."""

from __future__ import annotations

from collections import defaultdict

from tests.nemesis.harness import Outcome

__all__ = ["add", "note", "render"]

_outcomes: list[Outcome] = []
_long: list[tuple[str, int, float]] = []


def add(outcomes: list[Outcome]) -> None:
    _outcomes.extend(outcomes)


def note(backend: str, schedules: int, seconds: float) -> None:
    _long.append((backend, schedules, seconds))


def render() -> str:
    if not _outcomes:
        return ""
    rows: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in _outcomes:
        rows[(o.schedule.family, o.schedule.backend)].append(o)
    lines = [
        "| family | backend | schedules | maxFired | violations | seconds (sum) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (family, backend), group in sorted(rows.items()):
        lines.append(
            f"| {family} | {backend} | {len(group)} | {max(o.max_fired for o in group)} | "
            f"{sum(bool(o.violations) for o in group)} | {sum(o.seconds for o in group):.0f} |"
        )
    for backend in sorted({o.schedule.backend for o in _outcomes}):
        group = [o for o in _outcomes if o.schedule.backend == backend]
        lines.append(
            f"| all | {backend} | {len(group)} | {max(o.max_fired for o in group)} | "
            f"{sum(bool(o.violations) for o in group)} | {sum(o.seconds for o in group):.0f} |"
        )
    for backend, n, seconds in _long:
        lines.append(f"long set on {backend}: {n} schedules in {seconds:.0f} s wall")
    return "\n".join(lines)
