"""The store: per-run append-only records with insert-if-absent keys, over one SQLite file.

Writes go through the group-commit writer (``sqlite.Writer``); reads go through SQLAlchemy Core on
aiosqlite, on their own connections, so they never queue behind writes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from runtime.errors import ConfigError, FormatError, ProtocolError, StorageError
from runtime.journal import schema
from runtime.journal.migrate import ensure_schema, sqlite_path
from runtime.journal.sqlite import (
    BUSY_TIMEOUT_MS,
    AppendOp,
    CreateOp,
    IndexOp,
    Writer,
    check_format,
    configure,
)

__all__ = ["CODEC", "Appended", "Record", "RunPage", "RunRow", "Store"]

CODEC = "json"
"""The codec of every payload this bide writes: compact UTF-8 JSON, NaN refused."""

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


_encode = _compact_json()


def encode(payload: Any) -> str:
    try:
        return _encode(payload)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StorageError(f"a journal payload must be JSON: {exc}") from exc


def decode(codec: str, text: str, *, run_id: str, key: str) -> Any:
    if codec != CODEC:
        raise FormatError(
            f"record {key!r} of run {run_id!r} was written with codec {codec!r}; this bide reads "
            f"{CODEC!r} only",
            run_id=run_id,
        )
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProtocolError(
            f"record {key!r} of run {run_id!r} is not valid JSON: {exc}", run_id=run_id
        ) from exc


@dataclass(frozen=True, slots=True)
class Record:
    """One journal record. ``seq`` is its position in commit order across the whole file."""

    seq: int
    run_id: str
    key: str
    kind: str
    payload: Any
    created_ms: int
    codec: str = CODEC


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append did: whether this caller's record won, and the record that is there."""

    won: bool
    record: Record | None
    """The winning record; ``None`` when the append was refused by its ``unless`` guard."""
    watched: bool = False
    """Whether a record under the append's ``watch`` key existed when it committed."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run as the index lists it (derived; the records are the truth)."""

    run_id: str
    format: int
    status: str
    agent: str | None
    turns: int
    created_ms: int
    updated_ms: int
    detail: Any


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[RunRow]
    next_cursor: str | None
    """Pass as ``before=`` for the next (older) page; ``None`` on the last page."""


class Store:
    """An open journal file. Use ``await Store.open(url)`` and ``await store.close()``."""

    def __init__(self, path: str, engine: AsyncEngine, writer: Writer):
        self.path = path
        self._engine = engine
        self._writer = writer
        self._verified: set[str] = set()

    @classmethod
    async def open(
        cls,
        url: str | os.PathLike[str],
        *,
        migrate: bool = True,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> Self:
        """Open the journal at ``url``, migrating it to head unless ``migrate=False``."""
        path = sqlite_path(url)
        directory = os.path.dirname(path)
        if migrate and not os.path.isdir(directory):
            raise ConfigError(f"cannot create journal {path}: no directory {directory}")
        await asyncio.to_thread(
            ensure_schema, path, migrate=migrate, busy_timeout_ms=busy_timeout_ms
        )
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{path}",
            connect_args={"isolation_level": None},
            pool_size=4,
            max_overflow=4,
        )

        @sa.event.listens_for(engine.sync_engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            configure(dbapi_connection, busy_timeout_ms=busy_timeout_ms)

        writer = Writer(path, busy_timeout_ms=busy_timeout_ms)
        try:
            await writer.start()
        except BaseException:
            await engine.dispose()
            raise
        return cls(path, engine, writer)

    async def close(self) -> None:
        await self._writer.close()
        await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def commits(self) -> int:
        """How many transactions the writer has committed (group commit shares them)."""
        return self._writer.commits

    # --- writes ----------------------------------------------------------------------------

    async def create_run(self, run_id: str, *, agent: str | None = None) -> bool:
        """Write the run's header (format version) unless the run exists; True if it is new.

        An existing run written in another format is refused with ``FormatError``.
        """
        _check_run_id(run_id)
        header = encode({"format": schema.FORMAT_VERSION})
        created = bool(await self._writer.submit(CreateOp(run_id, header, agent)))
        self._verified.add(run_id)
        return created

    async def append(
        self,
        run_id: str,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        watch: str | None = None,
        index: Mapping[str, Any] | None = None,
    ) -> Appended:
        """Insert ``payload`` under ``key`` unless the key exists; return the winner.

        Of two writers of one key exactly one wins and both get the winning record. ``unless``
        names a key whose presence refuses the insert (checked in the same transaction);
        ``watch`` names a key whose presence is reported back; ``index`` updates the run's row
        in the derived index in the same transaction.
        """
        op = AppendOp(
            run_id,
            key,
            kind,
            CODEC,
            encode(payload),
            unless=unless,
            watch=watch,
            check_header=run_id not in self._verified,
            index=_index_fields(index) if index else None,
        )
        won, row, watched = await self._writer.submit(op)
        self._verified.add(run_id)
        if row is None:
            return Appended(False, None, watched)
        seq, kind_, codec, text, created_ms = row
        value = payload if won else decode(codec, text, run_id=run_id, key=key)
        return Appended(won, Record(seq, run_id, key, kind_, value, created_ms, codec), watched)

    async def update_index(self, run_id: str, **fields: Any) -> None:
        """Update the run's listing row (status, agent, turns, detail). Never touches a record."""
        await self._writer.submit(IndexOp(run_id, _index_fields(fields)))

    # --- reads -----------------------------------------------------------------------------

    async def get(self, run_id: str, key: str) -> Record | None:
        r = schema.records
        query = sa.select(r.c.seq, r.c.kind, r.c.codec, r.c.payload, r.c.created_ms).where(
            r.c.run_id == run_id, r.c.key == key
        )
        row = await self._read_one(query)
        if row is None:
            return None
        if run_id not in self._verified and key != "header":
            await self.check_run(run_id)
        seq, kind, codec, text, created_ms = row
        return Record(
            seq, run_id, key, kind, decode(codec, text, run_id=run_id, key=key), created_ms, codec
        )

    async def check_run(self, run_id: str) -> bool:
        """True if the run exists; ``FormatError`` if it is written in an unknown format."""
        r = schema.records
        row = await self._read_one(
            sa.select(r.c.payload).where(r.c.run_id == run_id, r.c.key == "header")
        )
        if row is None:
            return False
        check_format(run_id, row[0])
        self._verified.add(run_id)
        return True

    async def load(self, run_id: str, *, after: int = 0) -> list[Record]:
        """The run's records in commit order, those with ``seq > after`` only if given.

        The header is checked before any other record is decoded: a run in an unknown format
        raises ``FormatError`` and nothing of it is returned.
        """
        if run_id not in self._verified and not await self.check_run(run_id):
            return []
        r = schema.records
        query = (
            sa.select(r.c.seq, r.c.key, r.c.kind, r.c.codec, r.c.payload, r.c.created_ms)
            .where(r.c.run_id == run_id, r.c.seq > after)
            .order_by(r.c.seq)
        )
        try:
            async with self._engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        except sa.exc.OperationalError as exc:
            raise StorageError(f"journal {self.path}: {exc.orig}") from exc
        return [
            Record(
                seq,
                run_id,
                key,
                kind,
                decode(codec, text, run_id=run_id, key=key),
                created_ms,
                codec,
            )
            for seq, key, kind, codec, text, created_ms in rows
        ]

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        """Runs newest first, filtered by index status and run-id prefix, one page at a time."""
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        u = schema.runs
        query = sa.select(
            u.c.run_id,
            u.c.format,
            u.c.status,
            u.c.agent,
            u.c.turns,
            u.c.created_ms,
            u.c.updated_ms,
            u.c.detail,
        )
        if status is not None:
            query = query.where(u.c.status == status)
        if prefix:
            query = query.where(u.c.run_id.startswith(prefix, autoescape=True))
        if before is not None:
            created_ms, run_id = _parse_cursor(before)
            query = query.where(sa.tuple_(u.c.created_ms, u.c.run_id) < (created_ms, run_id))
        query = query.order_by(u.c.created_ms.desc(), u.c.run_id.desc()).limit(limit + 1)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        runs = [
            RunRow(
                run_id,
                fmt,
                status_,
                agent,
                turns,
                created_ms,
                updated_ms,
                json.loads(detail) if detail else None,
            )
            for run_id, fmt, status_, agent, turns, created_ms, updated_ms, detail in rows[:limit]
        ]
        cursor = None
        if len(rows) > limit:
            last = runs[-1]
            cursor = f"{last.created_ms}:{last.run_id}"
        return RunPage(runs, cursor)

    async def _read_one(self, query: sa.Select[Any]) -> Any:
        try:
            async with self._engine.connect() as conn:
                return (await conn.execute(query)).first()
        except sa.exc.OperationalError as exc:
            raise StorageError(f"journal {self.path}: {exc.orig}") from exc


def _check_run_id(run_id: object) -> None:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 256:
        raise ConfigError(f"a run id is a non-empty string of at most 256 characters: {run_id!r}")


def _index_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if "detail" in out and out["detail"] is not None:
        out["detail"] = encode(out["detail"])
    return out


def _parse_cursor(cursor: str) -> tuple[int, str]:
    created, sep, run_id = cursor.partition(":")
    if not sep or not created.isdigit():
        raise ConfigError(f"invalid page cursor {cursor!r}")
    return int(created), run_id
