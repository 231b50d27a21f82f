"""``python -m tests.crash.launch ARGS``: the bide CLI with a mutant applied first.

The mutant is named by ``BIDE_CRASH_MUTANT`` (see ``tests/crash/mutants.py``). Only the crash
suite starts this; the shipped runtime has no switch for any of it.
"""

from __future__ import annotations

import sys

from tests.crash import mutants

if __name__ == "__main__":
    mutants.apply_from_env()
    from runtime.cli import main

    raise SystemExit(main(sys.argv[1:], prog="python -m runtime"))
