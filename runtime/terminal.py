"""Terminal-safe text: values on one line, control and bidirectional characters escaped.

Run ids, tool names, call ids and results come from callers, models and servers; everything a
view prints goes through ``printable`` (or ``clip``, which also shortens).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["clip", "printable"]


def clip(value: Any, limit: int = 120) -> str:
    """A value on one line, as JSON, at most ``limit`` characters, with control characters
    escaped (a tool's result or a model's text must not drive the operator's terminal)."""
    try:
        text = printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        text = printable(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional controls: they reorder what a terminal shows (a tool name that reads backwards,
a call id that hides its tail), so they are escaped like control characters."""


def printable(text: str) -> str:
    """``text`` with control characters escaped as ``\\xNN`` and bidirectional controls as
    ``\\uNNNN``: safe to print to a terminal, shown in the order it is stored."""
    return "".join(_escaped(c) for c in text)


def _escaped(c: str) -> str:
    if c in _BIDI:
        return f"\\u{ord(c):04x}"
    if unicodedata.category(c) == "Cc":
        return f"\\x{ord(c):02x}"
    return c
