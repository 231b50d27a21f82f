"""For tests, demos and users' own tests: ScriptedModel (a Model that replays a script) and
MemoryStore (a journal's store in memory)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.errors import ConfigError, FormatError, StorageError
from runtime.events.hub import delta
from runtime.journal.codec import encode
from runtime.journal.names import FORMAT_VERSION
from runtime.journal.protocol import (
    RunPage,
    RunRow,
    check_appended,
    check_release,
    written_ahead,
)
from runtime.journal.sqlite.leases import (
    LeaseOp,
    LeaseRow,
    decide,
    holds,
    lease_of,
    now_ms,
    owner_text,
)
from runtime.messages import AssistantTurn, Message, ToolCall, Usage
from runtime.ownership import Lease, Owner, busy, lost
from runtime.records import Appended, Entry, Record
from runtime.tools import ToolSpec

__all__ = ["MemoryStore", "ScriptedModel"]


class ScriptedModel:
    """Replays a list of turns: ``{"text": ...}`` or ``{"tool_calls": [...], "text": ...}``.

    The answer is chosen by how many assistant turns the conversation already holds, never by an
    internal counter, so a run resumed in a fresh process gets the right turn. ``calls`` counts
    the requests this instance answered (to check that a resume asked for nothing recorded).
    A turn's text is streamed word by word to whoever follows the run (``runtime.events.delta``),
    as a real model's would be.
    """

    def __init__(self, turns: Sequence[Mapping[str, Any]]):
        if not isinstance(turns, list | tuple):
            raise ConfigError("ScriptedModel needs a list of turns")
        self.turns = tuple(_parse_turn(i, turn) for i, turn in enumerate(turns))
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedModel:
        """Read the same list of turns from a JSON file."""
        try:
            with open(path, encoding="utf-8") as f:
                turns = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read script {os.fspath(path)}: {exc}") from exc
        return cls(turns)

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        index = sum(isinstance(m, AssistantTurn) for m in messages)
        if index >= len(self.turns):
            raise ConfigError(
                f"ScriptedModel has {len(self.turns)} turns; the conversation asks for turn "
                f"{index + 1}"
            )
        self.calls += 1
        turn = self.turns[index]
        if turn.text:
            for word in re.findall(r"\S+\s*", turn.text):
                delta(word)
        return turn


def _parse_turn(index: int, turn: Mapping[str, Any]) -> AssistantTurn:
    where = f"script turn {index + 1}"
    if not isinstance(turn, Mapping):
        raise ConfigError(f"{where}: a turn is an object with 'text' and/or 'tool_calls'")
    unknown = set(turn) - {"text", "tool_calls", "usage"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"{where}: 'text' must be a string")
    calls = []
    for call in turn.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not {"id", "name"} <= set(call):
            raise ConfigError(f"{where}: each tool call needs 'id' and 'name'")
        calls.append(ToolCall(str(call["id"]), str(call["name"]), call.get("arguments", {})))
    if text is None and not calls:
        raise ConfigError(f"{where}: a turn needs 'text' or 'tool_calls'")
    usage = turn.get("usage")
    return AssistantTurn(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage.from_json(usage if isinstance(usage, Mapping) else None),
        finish_reason="tool_calls" if calls else "stop",
    )


class MemoryStore:
    """The ``Store`` protocol held in memory: ``Journal(store=MemoryStore())``.

    For tests and benchmarks that need a journal's rules (single-winner keys, guards, commit
    order, the listing index) without a file: nothing survives the process. With ``check``
    (the default) every payload goes through the journal's codec, so what SQLite would refuse
    is refused here too, and a record read back is a copy; ``check=False`` keeps the caller's
    objects (a benchmark of the loop alone).
    """

    path = ":memory:"

    def __init__(self, *, check: bool = True):
        self._check = check
        self._runs: dict[str, dict[str, Record]] = {}
        self._rows: dict[str, RunRow] = {}
        self._leases: dict[str, LeaseRow] = {}
        self._seq = 0
        self.commits = 0

    async def close(self) -> None:
        return None

    def _put(self, run_id: str, key: str, kind: str, payload: Any) -> Record:
        self._seq += 1
        if self._check:
            payload = json.loads(encode(payload))
        record = Record(self._seq, run_id, key, kind, payload, _now_ms())
        self._runs[run_id][key] = record
        return record

    def _copy(self, record: Record) -> Record:
        if not self._check:
            return record
        return dataclasses.replace(record, payload=json.loads(encode(record.payload)))

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        self._fence(run_id, epoch)
        if run_id in self._runs:
            return False
        self._runs[run_id] = {}
        self.commits += 1
        header = self._put(run_id, "header", "header", {"format": FORMAT_VERSION})
        ms = header.created_ms
        self._rows[run_id] = RunRow(run_id, FORMAT_VERSION, "running", agent, 0, ms, ms, None)
        return True

    async def append(
        self,
        run_id: str,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | tuple[str, ...] | None = None,
        watch: str | None = None,
        index: Mapping[str, Any] | None = None,
        epoch: int | None = None,
        before: Sequence[Entry] = (),
        release: bool = False,
    ) -> Appended:
        check_release(release, epoch)
        check_appended(run_id, key, kind, unless, watch, before)
        self._fence(run_id, epoch)
        run = self._runs.get(run_id)
        if run is None:
            raise FormatError(f"run {run_id!r} has no header record", run_id=run_id)
        guards = (unless,) if isinstance(unless, str) else unless or ()
        watched = watch is not None and watch in run
        refused = next((g for g in guards if g in run), None)
        if refused is not None:
            return Appended(False, None, watched, refused)
        record = run.get(key)
        won = record is None
        if before:
            taken = next((e.key for e in before if e.key in run), None)
            if taken is not None or not won:
                raise written_ahead(run_id, key, taken or key)
            if self._check:
                for e in before:
                    encode(e.payload)  # refused as SQLite would, before anything is kept
                encode(payload)
        if before or record is None:
            self.commits += 1
        ahead = tuple(self._put(run_id, e.key, e.kind, e.payload) for e in before)
        if record is None:
            record = self._put(run_id, key, kind, payload)
        self._index(run_id, dict(index or {}))
        if release:
            decide(LeaseOp("release", run_id, epoch), self._leases, set(), _now_ms())
        copy = self._copy(record) if not won else record
        return Appended(won, copy, watched, before=ahead, released=release)

    def _index(self, run_id: str, fields: dict[str, Any]) -> None:
        row = self._rows[run_id]
        unknown = set(fields) - {"status", "agent", "turns", "detail"}
        if unknown:
            raise StorageError(f"unknown run index columns {sorted(unknown)}")
        self._rows[run_id] = dataclasses.replace(row, **fields, updated_ms=_now_ms())

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None:
        self._fence(run_id, epoch)
        run = self._runs.get(run_id, {})
        if run_id in self._rows and (unless is None or unless not in run):
            self._index(run_id, fields)

    async def get(self, run_id: str, key: str) -> Record | None:
        record = self._runs.get(run_id, {}).get(key)
        return None if record is None else self._copy(record)

    async def check_run(self, run_id: str) -> bool:
        return run_id in self._runs

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        if prefix is not None and not prefix:
            raise ConfigError("a key prefix is a non-empty string")
        records = self._runs.get(run_id, {}).values()
        return [
            self._copy(r)
            for r in sorted(records, key=_seq)
            if r.seq > after and (prefix is None or r.key.startswith(prefix))
        ]

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        rows = sorted(self._rows.values(), key=lambda r: (r.created_ms, r.run_id), reverse=True)
        if status is not None:
            rows = [r for r in rows if r.status == status]
        if prefix:
            rows = [r for r in rows if r.run_id.startswith(prefix)]
        if before is not None:
            created, _, after_id = before.partition(":")
            if not created.isdigit():
                raise ConfigError(f"invalid page cursor {before!r}")
            rows = [r for r in rows if (r.created_ms, r.run_id) < (int(created), after_id)]
        page = [dataclasses.replace(r, lease=await self.lease(r.run_id)) for r in rows[:limit]]
        cursor = f"{page[-1].created_ms}:{page[-1].run_id}" if len(rows) > limit else None
        return RunPage(page, cursor)

    async def run_row(self, run_id: str) -> RunRow | None:
        row = self._rows.get(run_id)
        return None if row is None else dataclasses.replace(row, lease=await self.lease(run_id))

    # --- leases, by the same rules as the SQLite store's batches --------------------------

    def _fence(self, run_id: str, epoch: int | None) -> None:
        if epoch is None:
            return
        held = self._leases.get(run_id)
        if held is None or held[0] != epoch:
            raise lost(
                Lease(run_id, epoch, Owner("", "", 0, None, 0), 0, 0, True, False),
                None if held is None else held[0],
            )

    def _lease_op(self, op: LeaseOp, owner: Owner | None = None) -> tuple[bool, Lease | None]:
        self.commits += 1
        done, row, now = decide(op, self._leases, set(), now_ms())
        if row is None:
            return done, None
        return done, lease_of(op.run_id, row, now, owner if done else None)

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        if not ttl > 0:
            raise ConfigError(f"a lease's ttl is a positive number of seconds, not {ttl!r}")
        op = LeaseOp("acquire", run_id, take_over, owner_text(owner), owner.host, round(ttl * 1000))
        granted, lease = self._lease_op(op, owner)
        assert lease is not None
        if not granted:
            raise busy(lease)
        return lease

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        renewed, now = self._lease_op(
            LeaseOp("renew", lease.run_id, lease.epoch, ttl_ms=round(ttl * 1000)), lease.owner
        )
        if not renewed or now is None:
            raise lost(lease, None if now is None else now.epoch)
        return now

    async def release(self, lease: Lease) -> bool:
        return self._lease_op(LeaseOp("release", lease.run_id, lease.epoch))[0]

    async def lease(self, run_id: str) -> Lease | None:
        row = self._leases.get(run_id)
        return None if row is None else lease_of(run_id, row, now_ms())

    async def clock_ms(self) -> int:
        """The journal's clock: the SQLite store's (``leases.now_ms``)."""
        return now_ms()

    async def claimable(
        self, *, limit: int = 10, host: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        now = now_ms()
        found = []

        def order(row: RunRow) -> tuple[int, int, str]:
            # Orphans first, then runs nobody holds, then live leases (as the SQLite store).
            held = self._leases.get(row.run_id)
            rank = 1 if held is None or held[5] else 2 if holds(held, now) else 0
            return (rank, row.updated_ms, row.run_id)

        for row in sorted(self._rows.values(), key=order):
            if row.status not in ("running", "submitted"):
                continue
            held = self._leases.get(row.run_id)
            if held is None or not holds(held, now) or (host is not None and held[2] == host):
                found.append((row.run_id, await self.lease(row.run_id)))
            if len(found) == limit:
                break
        return found


def _seq(record: Record) -> int:
    return record.seq


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
