"""Saying an outage once: one warning when something that is retried starts failing, one line
when it works again, the attempts in between only at debug (a database failover takes a while,
and a line per attempt would bury the rest)."""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["Outage"]


class Outage:
    """One warning when something starts failing (``lost``), one info line when it works again
    (``restored``, with how long it took); the failures in between only at debug."""

    def __init__(self, log: Any, lost: str, restored: str):
        self._log = log
        self._lost = lost
        self._restored = restored
        self._since: float | None = None
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, **fields: Any) -> None:
        self._failures += 1
        if self._since is None:
            self._since = time.monotonic()
            self._log.warning(self._lost, **fields)
        else:
            self._log.log(logging.DEBUG, self._lost, failures=self._failures, **fields)

    def ended(self, **fields: Any) -> None:
        if self._since is None:
            return
        seconds = round(time.monotonic() - self._since, 3)
        self._log.info(self._restored, seconds=seconds, failures=self._failures, **fields)
        self._since = None
        self._failures = 0
