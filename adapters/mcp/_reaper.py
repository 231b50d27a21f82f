"""Runs a stdio MCP server for bide and ends it once bide is gone: ``_reaper.py GRACE CMD ARGS...``.

bide starts this with ``python -I -S`` in a process group of its own; the server inherits the
pipes to bide, and this process lets go of them. While bide lives it only waits for the server.
When bide dies, however it dies, the server's stdin has ended: it gets GRACE seconds to finish
what it holds and exit on its own, then its process group gets SIGTERM, then SIGKILL.
Standard library only, and nothing from bide: it must start fast and alone.
"""

import os
import signal
import subprocess
import sys
import time

_POLL = 0.1
_TERM_GRACE = 2.0


def main() -> int:
    grace = float(sys.argv[1])
    host = os.getppid()
    server = subprocess.Popen(sys.argv[2:])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while os.getppid() == host:
        try:
            return _exit_code(server.wait(timeout=_POLL))
        except subprocess.TimeoutExpired:
            pass
    try:
        return _exit_code(server.wait(timeout=grace))
    except subprocess.TimeoutExpired:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGTERM)
    deadline = time.monotonic() + _TERM_GRACE
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(os.getpgrp(), signal.SIGKILL)
    return 1  # not reached: SIGKILL ends this process too


def _exit_code(code: int) -> int:
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
