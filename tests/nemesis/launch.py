"""``python -m tests.nemesis.launch ARGS``: the bide CLI, with ``NEMESIS_STOP`` (``point@hit``)
making that crash point SIGSTOP the process, for a build whose ``BIDE_CRASH`` has no ``:stop``.
Only the nemesis suite starts this; a build that has ``:stop`` is armed through ``BIDE_CRASH``."""

from __future__ import annotations

import os
import signal
import sys

from runtime import faults


def _stop_at(spec: str) -> None:
    name, _, hit = spec.partition("@")
    target = int(hit or 1)
    passed = 0
    original = faults.crashpoint

    def crashpoint(point: str, count: int = 1) -> None:
        nonlocal passed
        original(point, count)
        if point == name:
            before, passed = passed, passed + count
            if before < target <= passed:
                os.kill(os.getpid(), signal.SIGSTOP)

    faults.crashpoint = crashpoint  # type: ignore[assignment]


if __name__ == "__main__":
    if os.environ.get("NEMESIS_STOP"):
        _stop_at(os.environ["NEMESIS_STOP"])
    from runtime.cli import main

    raise SystemExit(main(sys.argv[1:], prog="python -m runtime"))
