"""What every store checks the same way, at its boundary: run ids, keys, query texts, index
columns, page cursors and lease times. Each refusal is a ``ConfigError`` naming what was wrong,
raised before anything reaches a batch (where it would fail the writes of other runs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.errors import ConfigError, StorageError
from runtime.jsontext import unstorable_text
from runtime.records import Entry
from runtime.store.codec import encode
from runtime.store.names import INDEX_COLUMNS

__all__ = [
    "check_appended",
    "check_query",
    "check_release",
    "check_run_id",
    "index_fields",
    "parse_cursor",
    "ttl_ms",
]


def check_release(release: bool, epoch: int | None) -> None:
    """A lease is released with an append only by the drive that holds it: ``release`` needs
    the ``epoch`` the append is fenced by."""
    if release and epoch is None:
        raise ConfigError("append(release=True) releases the lease of the given epoch: pass it")


def check_run_id(run_id: object) -> None:
    """``ConfigError`` unless ``run_id`` is a non-empty string of at most 256 characters that
    the journal can store (``codec.unstorable_text``). Reads check it too: no run has such an
    id, and PostgreSQL refuses a NUL even in a query."""
    problem = unstorable_text(run_id, name="run id")
    if problem is not None or not isinstance(run_id, str) or not run_id or len(run_id) > 256:
        why = f" ({problem})" if problem is not None else ""
        raise ConfigError(
            f"a run id is a non-empty string of at most 256 characters: {run_id!r}{why}"
        )


def check_query(**texts: str | None) -> None:
    """``ConfigError`` for a text given to a read that no record or run can hold (a NUL, text
    that is not valid Unicode): PostgreSQL refuses such a query outright, and SQLite would
    answer for a run that cannot exist; both backends refuse it alike."""
    for name, text in texts.items():
        if text is not None and (not text.isascii() or "\x00" in text):
            problem = unstorable_text(text, name=name.replace("_", " "))
            if problem is not None:
                raise ConfigError(f"no run can match this {problem}: {text!r}")


def check_appended(
    run_id: str,
    key: str,
    kind: str,
    unless: str | tuple[str, ...] | None = None,
    watch: str | None = None,
    before: Sequence[Entry] = (),
) -> None:
    """``ConfigError`` for an append naming a run, key or kind the journal cannot store (a
    NUL, text that is not valid Unicode): refused before it reaches a batch, where it would fail
    the writes of other runs committed with it."""
    check_run_id(run_id)
    texts = [("key", key), ("kind", kind)]
    texts += [("guard key", g) for g in ((unless,) if isinstance(unless, str) else unless or ())]
    texts += [("watched key", watch)] if watch is not None else []
    for entry in before:
        texts += [("key", entry.key), ("kind", entry.kind)]
    for name, text in texts:
        problem = unstorable_text(text, name=name)
        if problem is not None:
            raise ConfigError(f"run {run_id!r}: a record's {problem}: {text!r}")


def index_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The listing row's columns to write, ``detail`` encoded; ``StorageError`` for a column the
    index does not have."""
    out = dict(fields)
    unknown = set(out).difference(INDEX_COLUMNS)
    if unknown:
        raise StorageError(f"unknown run index columns {sorted(unknown)}")
    for column in ("status", "agent"):
        value = out.get(column)
        problem = None if value is None else unstorable_text(value, name=column)
        if problem is not None:
            raise ConfigError(f"the run index cannot store this {problem}: {value!r}")
    if "detail" in out and out["detail"] is not None:
        out["detail"] = encode(out["detail"])
    return out


def parse_cursor(cursor: str) -> tuple[int, str]:
    """A ``list_runs`` page cursor (``created_ms:run_id``) as its two parts."""
    created, sep, run_id = cursor.partition(":")
    if not sep or not created.isdigit():
        raise ConfigError(f"invalid page cursor {cursor!r}")
    return int(created), run_id


def ttl_ms(ttl: float) -> int:
    """A lease's ttl in whole milliseconds (at least 1); ``ConfigError`` unless it is positive."""
    if not ttl > 0:
        raise ConfigError(f"a lease's ttl is a positive number of seconds, not {ttl!r}")
    return max(1, round(ttl * 1000))
