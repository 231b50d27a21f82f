"""A run's settled turns, journaled in chunks, so that a drive resumes from a few records.

Every ``EVERY`` turns, a drive writes ahead with its next turn a ``history/<last>`` record: the
turns since the previous chunk, each as the model gave it with what the model saw of each of
its calls' results, and the run's usage so far. A turn is asked for only once every call before
it has its result, so nothing recorded later changes what a chunk says. The records stay the
truth: a chunk is derived from them, views fold the records, ``RunState.anomalies`` holds each
chunk to them, and the tests hold every resumed state to the fold of all records.

A resumed drive reads the header, the start, the chunks and the records after the last chunk
(``RunState.resumed``). A chunk's turns are decoded when they are first read (by the model,
which is shown them), not when the drive resumes: a drive that halts, waits or finds the run
ended never decodes them.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from runtime import records as R
from runtime.errors import CorruptJournal
from runtime.messages import AssistantTurn, Message, ToolResultMessage, Usage
from runtime.records import Record

__all__ = ["EVERY", "History", "Told", "Turns", "chunk", "disagreement"]

EVERY = 64
"""Turns per chunk. A resumed drive folds the records of at most about this many turns, and
reads one chunk record for every ``EVERY`` turns before them."""

VERSION = 1
"""The shape of a chunk's payload. A chunk of another version is not read: the drive folds
every record instead, as it does for a run that has none."""

Told = Callable[[str], tuple[Any, bool]]
"""What the model saw of a call's result, by call id: (content, is_error)."""


def chunk(
    first: int, turns: Sequence[AssistantTurn], told: Told, usage: Usage
) -> tuple[str, dict[str, Any]]:
    """The key and payload of the chunk of ``turns``, numbered from ``first``, all settled:
    ``told`` gives what the model saw of a call's result, ``usage`` is the run's up to them."""
    entries = []
    calls = 0
    for turn in turns:
        results = [list(told(c.id)) for c in turn.tool_calls]
        entries.append([turn.to_json(), results])
        calls += len(results)
    text = json.dumps(entries, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    last = first + len(turns) - 1
    payload = {
        "v": VERSION,
        "first": first,
        "last": last,
        "calls": calls,
        "usage": usage.to_json(),
        "turns": text,  # JSON text: decoded when a turn of it is first read
    }
    return R.history_key(last), payload


def disagreement(record: Record, turns: Sequence[AssistantTurn], told: Told) -> str | None:
    """How the chunk ``record`` disagrees with the run's ``turns`` and their calls' results
    (``told``), all folded from its records; ``None`` if it says what the records say."""
    payload = record.payload
    try:
        first, last = payload["first"], payload["last"]
        entries = json.loads(payload["turns"])
        if len(entries) != last - first + 1 or not 1 <= first <= last <= len(turns):
            return f"it holds turns {first} to {last} of {len(turns)}"
        for n, (turn_json, results) in enumerate(entries, start=first):
            turn = turns[n - 1]
            if turn_json != turn.to_json():
                return f"turn {n} is not the turn recorded"
            if results != [list(told(c.id)) for c in turn.tool_calls]:
                return f"the results of turn {n} are not those recorded"
        usage = Usage()
        for turn in turns[:last]:
            usage = usage + turn.usage
        if payload["usage"] != usage.to_json():
            return f"its usage is not the sum of turns 1 to {last}"
    except Exception as exc:  # a damaged chunk, of any shape
        return f"it cannot be read ({type(exc).__name__}: {exc})"
    return None


class History:
    """The chunks of a run's history, in order; their turns decoded as they are read."""

    __slots__ = ("_chunks", "_decoded", "_ids", "_messages", "_turns", "count", "run_id", "usage")

    def __init__(self, run_id: str, chunks: Sequence[Record]):
        self.run_id = run_id
        self._chunks = list(chunks)
        self._turns: list[int] = []  # turns up to the end of each chunk
        self._messages: list[int] = []  # messages (turns and results) up to the end of each
        messages = 0
        for record in self._chunks:
            payload = record.payload
            if not isinstance(payload, dict):
                raise self._corrupt(record, "it is not an object")
            first, last, calls = (_field(payload, k) for k in ("first", "last", "calls"))
            expected = self._turns[-1] + 1 if self._turns else 1
            if (
                payload.get("v") != VERSION
                or first != expected
                or last < first
                or calls < 0
                or not isinstance(payload.get("turns"), str)
            ):
                raise self._corrupt(
                    record,
                    f"its fields (v {payload.get('v')!r}, turns {first} to {last}, {calls} calls)"
                    f" do not follow the chunk before it (turns up to {expected - 1})",
                )
            messages += last - first + 1 + calls
            self._turns.append(last)
            self._messages.append(messages)
        if not self._chunks:
            raise ValueError("a history has at least one chunk")
        self.count = self._turns[-1]
        """How many turns the chunks hold (the run's first ``count`` turns)."""
        self.usage = Usage.from_json(_usage(self._chunks[-1], self))
        """The run's usage up to turn ``count``."""
        self._decoded: dict[int, tuple[list[AssistantTurn], list[Message]]] = {}
        self._ids: set[str] | None = None

    @property
    def read(self) -> tuple[int, int]:
        """How many chunk records there are, and how many calls their turns made."""
        return len(self._chunks), self._messages[-1] - self.count

    @property
    def messages(self) -> int:
        """How many messages the chunks' turns make: each turn, then its calls' results."""
        return self._messages[-1]

    def turn(self, i: int) -> AssistantTurn:
        """Turn ``i + 1`` (``0 <= i < count``)."""
        c = bisect.bisect_right(self._turns, i)
        before = self._turns[c - 1] if c else 0
        return self._decode(c)[0][i - before]

    def message(self, j: int) -> Message:
        """The ``j``-th message of the chunks' turns (``0 <= j < messages``)."""
        c = bisect.bisect_right(self._messages, j)
        before = self._messages[c - 1] if c else 0
        return self._decode(c)[1][j - before]

    def knows(self, call_id: str) -> bool:
        """Whether one of the chunks' turns asked for a call with this id."""
        if self._ids is None:
            self._ids = {
                call.id
                for c in range(len(self._chunks))
                for turn in self._decode(c)[0]
                for call in turn.tool_calls
            }
        return call_id in self._ids

    def _decode(self, c: int) -> tuple[list[AssistantTurn], list[Message]]:
        decoded = self._decoded.get(c)
        if decoded is not None:
            return decoded
        record = self._chunks[c]
        payload = record.payload
        try:
            entries = json.loads(payload["turns"])
            turns: list[AssistantTurn] = []
            messages: list[Message] = []
            for turn_json, results in entries:
                turn = AssistantTurn.from_json(turn_json)
                if not isinstance(results, list) or len(results) != len(turn.tool_calls):
                    raise ValueError("a turn's results do not match its calls")
                turns.append(turn)
                messages.append(turn)
                for call, (content, is_error) in zip(turn.tool_calls, results, strict=True):
                    messages.append(ToolResultMessage(call.id, call.name, content, is_error))
        except Exception as exc:  # a damaged chunk, of any shape
            raise self._corrupt(record, f"its turns cannot be read ({exc})") from exc
        before = self._turns[c - 1] if c else 0
        if len(turns) != self._turns[c] - before or len(messages) != self._messages[c] - (
            self._messages[c - 1] if c else 0
        ):
            raise self._corrupt(record, "it holds another number of turns or results than it says")
        self._decoded[c] = (turns, messages)
        return turns, messages

    def _corrupt(self, record: Record, why: str) -> CorruptJournal:
        return CorruptJournal(
            f"run {self.run_id!r}: history chunk {record.key!r} (seq {record.seq}) is damaged: "
            f"{why}",
            run_id=self.run_id,
            key=record.key,
            seq=record.seq,
        )


def _field(payload: dict[str, Any], name: str) -> int:
    value = payload.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _usage(record: Record, history: History) -> Any:
    usage = record.payload.get("usage")
    if not isinstance(usage, dict) or not all(
        isinstance(usage.get(k, 0), int) for k in ("input_tokens", "output_tokens")
    ):
        raise history._corrupt(record, "its usage is not a usage")
    return usage


class Turns(Sequence[AssistantTurn]):
    """A run's turns: those of its history chunks (decoded as read), then those folded from
    its records (``live``). Without a history, a list of the turns folded."""

    __slots__ = ("_history", "live")

    def __init__(self, history: History | None = None):
        self._history = history
        self.live: list[AssistantTurn] = []
        """The turns folded from records (after the history's, if any)."""

    @property
    def settled(self) -> int:
        """How many of the turns come from the history chunks."""
        return self._history.count if self._history is not None else 0

    def append(self, turn: AssistantTurn) -> None:
        self.live.append(turn)

    def __len__(self) -> int:
        return self.settled + len(self.live)

    @overload
    def __getitem__(self, i: int) -> AssistantTurn: ...

    @overload
    def __getitem__(self, i: slice) -> list[AssistantTurn]: ...

    def __getitem__(self, i: int | slice) -> AssistantTurn | list[AssistantTurn]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("turn index out of range")
        settled = self.settled
        if i >= settled:
            return self.live[i - settled]
        assert self._history is not None
        return self._history.turn(i)

    def __iter__(self) -> Iterator[AssistantTurn]:
        for i in range(self.settled):
            yield self[i]
        yield from self.live

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Turns({self.settled} in history, {self.live!r})"
