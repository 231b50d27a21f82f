"""The journal's payload codec: compact JSON in, JSON out, refusing a payload that could not be
read back as written (``runtime.jsontext`` checks values; the codec's name is
``records.CODEC``). Every store uses it."""

from __future__ import annotations

import json
from typing import Any

from runtime.errors import CorruptJournal, StorageError
from runtime.jsontext import MAX_DEPTH, compact, find_problem, storable_text
from runtime.records import CODEC

__all__ = ["decode", "encode"]

_PAYLOAD_DEPTH = MAX_DEPTH + 28
"""A record's payload wraps the values it holds in a few levels of its own."""


def encode(payload: Any) -> str:
    """A payload as the journal stores it; ``StorageError`` naming the field if it cannot be."""
    try:
        text = compact(payload)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and storable_text(text, _PAYLOAD_DEPTH):
        return text
    problem = find_problem(payload, "payload", _PAYLOAD_DEPTH) or "payload: not JSON"
    raise StorageError(f"a journal payload must be JSON that can be stored: {problem}")


def decode(codec: str, text: str, *, run_id: str, key: str, seq: int | None = None) -> Any:
    """A stored payload as a value; ``CorruptJournal`` if the record cannot be read as written."""
    # Key and seq name the record, so an operator can find the damaged one in the file.
    where = f" (seq {seq})" if seq is not None else ""
    if codec != CODEC:
        raise CorruptJournal(
            f"record {key!r} of run {run_id!r} was written with codec {codec!r}{where}; this "
            f"bide reads {CODEC!r} only",
            run_id=run_id,
            key=key,
            seq=seq,
        )
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:  # TypeError: a number or blob
        raise CorruptJournal(
            f"record {key!r} of run {run_id!r} is not valid JSON{where}: {exc}",
            run_id=run_id,
            key=key,
            seq=seq,
        ) from exc
