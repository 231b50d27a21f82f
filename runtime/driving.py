"""Which drive is running the current tool call, for tools that drive runs of their own (a child
agent's tool, ``runtime.children``). Set by the drives of agents that have such a tool."""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["driving"]

driving: contextvars.ContextVar[Any] = contextvars.ContextVar("bide_driving", default=None)
"""The ``RunDrive`` whose tools are running (typed loosely: the loop sits above this module)."""
