"""JSON text from outside, read and checked within bounds: a value refused when it arrives (an
operator's input, a model's tool arguments, an MCP server's answer) rather than a record that
cannot be read back, and a text nested too deeply refused before Python's recursive parser sees
it. The journal's codec (``runtime.store.codec``) stores what passes."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from runtime.errors import ConfigError

__all__ = [
    "MAX_DEPTH",
    "TooDeep",
    "check_signal_name",
    "compact",
    "find_problem",
    "parse_json",
    "storable_text",
    "unstorable",
    "unstorable_text",
]


_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _compact_json() -> Callable[[Any], str]:
    """``_encoder.encode``, minus the Python-level setup it repeats on every call.

    The standard library builds a fresh C encoder per ``encode``; building it once halves the
    cost of a small payload. Without a circular-reference check, a cycle ends in RecursionError,
    which ``encode`` reports like any other non-JSON payload. Falls back to ``_encoder.encode``
    where the C accelerator is missing or does not agree with it.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return _encoder.encode
    try:
        iterencode = make(
            None,
            _encoder.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            False,
            False,
            False,
        )
    except TypeError:  # pragma: no cover - a changed private signature
        return _encoder.encode
    join = "".join

    def fast(payload: Any) -> str:
        return join(iterencode(payload, 0))

    sample = {"a": [1, 2.5, None, True, "\u00e9\n"], "b": {"c": -0.0}, 3: "x"}
    try:
        if fast(sample) == _encoder.encode(sample):
            return fast
    except Exception:  # pragma: no cover
        pass
    return _encoder.encode  # pragma: no cover


compact = _compact_json()
"""A value as compact JSON text (``TypeError``/``ValueError`` if it is not JSON)."""

MAX_DEPTH = 100
"""How deeply a journaled value may nest (objects and arrays). Deeper values are refused when
they arrive, so that every record written can be read back (decoding recurses)."""


def unstorable(value: Any, *, name: str = "value", depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` cannot be journaled and read back identically, or ``None`` if it can.

    The reason names where in the value (called ``name``) the problem is, e.g.
    ``arguments.note: text that is not valid Unicode``. JSON only: no
    NaN or infinity, string keys, text that is valid Unicode (a lone surrogate such as
    ``"\\ud800"`` cannot be stored as UTF-8), nesting at most ``depth`` levels.
    """
    try:
        if storable_text(compact(value), depth):
            return None
    except (TypeError, ValueError, RecursionError):
        pass
    return find_problem(value, name, depth) or f"{name}: not JSON"


def unstorable_text(text: object, *, name: str = "id") -> str | None:
    """Why ``text`` cannot be an id, a key or a name in the journal, or ``None`` if it can.

    Such texts are stored as they are, in columns of their own, not as JSON (which escapes
    what it holds): a string of valid Unicode without a NUL, which PostgreSQL's ``text`` cannot
    hold (SQLite could, so it is refused on both backends alike).
    """
    if not isinstance(text, str):
        return f"{name}: {type(text).__name__} is not a string"
    at = text.find("\x00")
    if at >= 0:
        return f"{name}: a NUL character (at {at}), which a journal cannot store"
    return find_problem(text, name, 0)


def storable_text(text: str, depth: int) -> bool:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    # Nesting deeper than ``depth`` needs more than ``depth`` brackets: count before walking.
    return text.count("[") + text.count("{") <= depth or _nesting(text) <= depth


def _nesting(text: str) -> int:
    """The deepest nesting of a JSON text (brackets inside strings are skipped)."""
    deepest = level = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            level += 1
            deepest = max(deepest, level)
        elif c in "]}":
            level -= 1
    return deepest


def find_problem(value: Any, here: str, depth: int) -> str | None:
    if depth < 0:
        return f"{here}: nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{here}: text that is not valid Unicode ({exc.reason} at {exc.start})"
        return None
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if value == value and abs(value) != float("inf") else f"{here}: {value}"
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                if k is None or isinstance(k, int | float):
                    k = json.dumps(k)  # the encoder writes such keys as text, as JSON must
                else:
                    return f"{here}: a key that is not a string ({type(k).__name__})"
            path = f"{here}.{k if k.isidentifier() else json.dumps(k, ensure_ascii=True)}"
            problem = find_problem(k, path, depth) or find_problem(v, path, depth - 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            problem = find_problem(v, f"{here}[{i}]", depth - 1)
            if problem is not None:
                return problem
        return None
    return f"{here}: {type(value).__name__} is not JSON"


class TooDeep(ValueError):
    """A JSON text nested deeper than a journal keeps (``MAX_DEPTH``), refused unparsed."""

    def __init__(self, depth: int = MAX_DEPTH):
        super().__init__(f"JSON nested more than {depth} levels deep")
        self.depth = depth


def parse_json(
    text: str, *, depth: int = MAX_DEPTH, parse_constant: Callable[[str], Any] | None = None
) -> Any:
    """A JSON text that arrived from outside (an operator, a model, a peer) as a value.

    ``ValueError`` if it is not JSON; ``TooDeep`` (a ``ValueError`` too) if it nests deeper
    than ``depth``, checked before parsing: Python's parser recurses, and a text thousands of
    levels deep would end in ``RecursionError`` (and could never be journaled anyway).
    """
    if text.count("[") + text.count("{") > depth and _nesting(text) > depth:
        raise TooDeep(depth)
    try:
        return json.loads(text, parse_constant=parse_constant)
    except RecursionError:  # pragma: no cover - the count above comes first
        raise TooDeep(depth) from None


def check_signal_name(name: Any, what: str = "signal name") -> str:
    """A signal's name or id: 1 to 128 characters, no ``/`` (it is part of a key), no NUL."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 128
        or "/" in name
        or unstorable_text(name) is not None
    ):
        raise ConfigError(f"a {what} is 1 to 128 characters, without '/' or NUL: {name!r}")
    return name
