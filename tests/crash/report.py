"""The crash suite's results: one line per group of schedules, and one per mutant.

Tests add to it; ``tests/crash/conftest.py`` prints it at the end of the session and writes it to
``crash-report.md`` in pytest's base temporary directory (and to ``$BIDE_CRASH_REPORT`` if set).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.crash.harness import Outcome

__all__ = [
    "FAILURES",
    "GROUPS",
    "MUTANTS",
    "MUTANT_SECONDS",
    "WRITTEN",
    "add",
    "add_mutant",
    "render",
    "worst",
]


@dataclass(frozen=True)
class Line:
    group: str
    schedules: int
    kills: int
    max_fired: int
    violations: int
    misses: int
    halts: int
    reruns: int
    duplicates: int
    seconds: float
    found: int = 0
    absent: int = 0
    stalled: int = 0
    taken_over: int = 0


GROUPS: list[Line] = []
MUTANTS: list[tuple[str, str, str]] = []
FAILURES: list[str] = []
WRITTEN: list[str] = []
MUTANT_SECONDS: list[float] = []

HEADER = (
    "| group | schedules | SIGKILLs | maxFired | violations | misses | safe halts "
    "| read-only re-runs | duplicate idempotent applications | seconds "
    "| settled by a reconciler: found / absent | workers stopped / taken over |"
)


def add(group: str, outcomes: list[Outcome], seconds: float) -> Line:
    line = Line(
        group=group,
        schedules=len(outcomes),
        kills=sum(o.kills for o in outcomes),
        max_fired=max((o.max_fired for o in outcomes), default=0),
        violations=sum(len(o.violations) for o in outcomes),
        misses=sum(o.misses for o in outcomes),
        halts=sum(o.halts for o in outcomes),
        reruns=sum(o.reruns for o in outcomes),
        duplicates=sum(o.duplicates for o in outcomes),
        seconds=seconds,
        found=sum(o.settled_found for o in outcomes),
        absent=sum(o.settled_absent for o in outcomes),
        stalled=sum(o.stalled for o in outcomes),
        taken_over=sum(o.taken_over for o in outcomes),
    )
    GROUPS.append(line)
    FAILURES.extend(o.describe() for o in outcomes if o.violations)
    return line


SEVERITY = ("fired", "applied", "different keys", "ran again", "halted", "requested again")


def worst(outcome: Outcome) -> str:
    """The violation that says most about what broke: a double fire before anything else."""
    for word in SEVERITY:
        for violation in outcome.violations:
            if word in violation:
                return violation
    return outcome.violations[0]


def add_mutant(mutant: str, caught_by: str, violation: str) -> None:
    MUTANTS.append((mutant, caught_by, violation))


def render() -> str:
    if not GROUPS and not MUTANTS:
        return ""
    out = []
    if GROUPS:
        out += [HEADER, "|" + "---|" * 12]
        for g in GROUPS:
            out.append(
                f"| {g.group} | {g.schedules} | {g.kills} | {g.max_fired} | {g.violations} "
                f"| {g.misses} | {g.halts} | {g.reruns} | {g.duplicates} | {g.seconds:.0f} "
                f"| {g.found} / {g.absent} | {g.stalled} / {g.taken_over} |"
            )
    if MUTANTS:
        took = f" ({sum(MUTANT_SECONDS):.0f} s)" if MUTANT_SECONDS else ""
        out += [
            "",
            f"Mutants{took}:",
            "",
            "| mutant | caught by schedule | first violation |",
            "|---|---|---|",
        ]
        for mutant, caught_by, violation in MUTANTS:
            out.append(f"| {mutant} | {caught_by} | {violation} |")
    if FAILURES:
        out += ["", "Failing schedules (replay each with its command):", *FAILURES]
    return "\n".join(out)
