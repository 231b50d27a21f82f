"""Crash points: named places where a test can make the process SIGKILL itself, with no cleanup.

``BIDE_CRASH`` names the points to arm, each with the hit that fires (default the first), e.g.
``BIDE_CRASH="tool.after_call@2,write.after_commit@7"``. A point armed with ``:stop``
(``attempt.after_marker@1:stop``) SIGSTOPs the process instead, for a test that resumes it
later (SIGCONT) to see what a stalled process does when it wakes. Nothing is armed at import:
the CLI's entry point calls ``arm_from_environment()``, and so do the crash suite's child
processes. Unarmed, every point is one global check. The points are listed in ``POINTS``.
"""

from __future__ import annotations

import os
import signal

from runtime.errors import ConfigError

__all__ = ["POINTS", "arm", "arm_from_environment", "crashpoint"]

POINTS = (
    "model.after_answer",  # the model answered; its turn is not recorded yet
    "turn.before_record",  # the turn, written ahead, is about to commit with the next record
    "turn.after_record",  # the turn is committed (alone, or with a result, marker or end)
    "attempt.before_marker",  # about to write a side effect's attempt marker
    "attempt.after_marker",  # the marker is committed; the call has not left
    "tool.after_effect",  # inside a test tool, right after its effect (armed by test tools)
    "tool.after_call",  # the call returned; its result is not recorded yet
    "result.after_record",  # the result is committed
    "end.before_marker",  # the final answer is in hand; it commits with the end marker
    "writer.after_commit",  # the group-commit writer committed a batch; callers not told yet
    "resolve.before_record",  # a halt resolution is about to be written
    "write.before_commit",  # the K-th record write, before its transaction commits
    "write.after_commit",  # the K-th record write, after its transaction commits
)

_armed: dict[str, int] | None = None
_stops: set[str] = set()
"""The armed points that SIGSTOP rather than SIGKILL."""
_hits: dict[str, int] = {}


def arm(spec: str | None) -> None:
    """Arm crash points from a spec like ``"tool.after_call@2,write.after_commit"``.

    A spec naming an unknown point or a hit that is not a positive integer is a ``ConfigError``
    and arms nothing.
    """
    global _armed
    _hits.clear()
    _stops.clear()
    if not spec:
        _armed = None
        return
    armed: dict[str, int] = {}
    stops: set[str] = set()
    for part in spec.split(","):
        point, _, action = part.strip().partition(":")
        if action not in ("", "stop"):
            raise ConfigError(f"BIDE_CRASH: {part.strip()!r}: the action after ':' is 'stop'")
        name, _, hit = point.partition("@")
        if name not in POINTS:
            raise ConfigError(
                f"BIDE_CRASH: unknown crash point {name!r}; known: {', '.join(POINTS)}"
            )
        if hit and not (hit.isdigit() and int(hit) > 0):
            raise ConfigError(f"BIDE_CRASH: the hit after {name}@ must be a positive integer")
        armed[name] = int(hit) if hit else 1
        if action:
            stops.add(name)
    _armed = armed
    _stops.update(stops)


def arm_from_environment() -> None:
    """Arm the points ``BIDE_CRASH`` names (the CLI and crash-test children call this)."""
    arm(os.environ.get("BIDE_CRASH"))


def crashpoint(name: str, count: int = 1) -> None:
    """Pass ``name`` ``count`` times; SIGKILL (or SIGSTOP) this process if the armed hit is
    among them."""
    if _armed is None:
        return
    target = _armed.get(name)
    if target is None:
        return
    before = _hits.get(name, 0)
    _hits[name] = before + count
    if before < target <= before + count:
        os.kill(os.getpid(), signal.SIGSTOP if name in _stops else signal.SIGKILL)
