"""Explore every interleaving of the protocol model up to its bounds, breadth first, and print
the state count, the depth and either PASS or the shortest trail to a violated property.

    python spec/check.py              # the model of bide, at the default bounds
    python spec/check.py --deep       # at deeper bounds (minutes)
    python spec/check.py --mutants    # each known bug, which must yield a trail
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``spec`` and ``runtime`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spec.models import DEEP, MAIN, MUTANTS
from spec.protocol import (
    PROPERTIES,
    Action,
    Model,
    State,
    describe,
    initial,
    successors,
    violations,
)

__all__ = ["Report", "check"]


@dataclass(frozen=True)
class Report:
    """What one exploration found."""

    model: Model
    states: int
    """Distinct states reached."""
    depth: int
    """The longest shortest path explored, in steps."""
    seconds: float
    violation: str | None
    trail: tuple[tuple[Action, State], ...]
    """The steps from the initial state to the violating one (empty when none)."""

    @property
    def passed(self) -> bool:
        return self.violation is None

    def schedule(self) -> str:
        """The trail as a numbered schedule, one step a line, each at its journal clock."""
        lines, clock = [], 0
        for n, (action, _) in enumerate(self.trail, start=1):
            clock += action == ("tick",)
            lines.append(f"{n:3}. {describe(action, self.model)} [clock {clock}]")
        return "\n".join(lines)

    def summary(self) -> str:
        head = (
            f"{self.model.name}: {self.states} states, depth {self.depth}, {self.seconds:.1f} s: "
        )
        if self.passed:
            return head + "PASS"
        return f"{head}VIOLATED: {self.violation}\n{self.schedule()}"


def check(model: Model, properties: tuple[str, ...] = PROPERTIES) -> Report:
    """Breadth-first over every state reachable within the model's bounds; stop at the first
    state that breaks one of ``properties`` (its trail is then a shortest one)."""
    started = time.perf_counter()
    start = initial(model)
    parent: dict[State, tuple[State, Action] | None] = {start: None}
    frontier = [start]
    depth = 0
    bad = violations(start, model, properties)
    end: State | None = start if bad else None
    while frontier and end is None:
        reached: list[State] = []
        for s in frontier:
            for action, t in successors(s, model):
                if t in parent:
                    continue
                parent[t] = (s, action)
                bad = violations(t, model, properties)
                if bad:
                    end = t
                    break
                reached.append(t)
            if end is not None:
                break
        if reached or end is not None:
            depth += 1
        frontier = reached
    trail: list[tuple[Action, State]] = []
    at = end
    while at is not None and (step := parent[at]) is not None:
        before, action = step
        trail.append((action, at))
        at = before
    trail.reverse()
    return Report(
        model=model,
        states=len(parent),
        depth=depth,
        seconds=time.perf_counter() - started,
        violation=bad[0] if bad else None,
        trail=tuple(trail),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deep", action="store_true", help="check at the deeper bounds")
    parser.add_argument("--mutants", action="store_true", help="check each known bug instead")
    args = parser.parse_args(argv)
    failed = False
    if args.mutants:
        for mutant in MUTANTS:
            report = check(mutant.model, (mutant.violates,))
            print(report.summary(), end="\n\n", flush=True)
            if report.violation != mutant.violates:
                print(f"{mutant.model.name}: expected a trail to: {mutant.violates}")
                failed = True
        return 1 if failed else 0
    for model in DEEP if args.deep else MAIN:
        report = check(model)
        print(report.summary(), flush=True)
        failed = failed or not report.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
