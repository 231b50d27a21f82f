"""The exception tree: a damaged journal record is one category, whichever way it is damaged."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from runtime import Agent, Journal, RunStatus, ToolOutcomeUnknown, tool
from runtime.errors import (
    BideError,
    CorruptJournal,
    FormatError,
    ProtocolError,
    StorageError,
)
from runtime.journal import SQLiteStore
from runtime.reconcile import Attempt, Unknown
from runtime.testing import ScriptedModel
from runtime.worker import Worker
from tests.helpers import call


def _damage(db_path: Path, key: str, codec: str, payload: str) -> int:
    raw = sqlite3.connect(db_path)
    with raw:
        cursor = raw.execute(
            "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
            "VALUES ('r', ?, 't', ?, ?, 0)",
            (key, codec, payload),
        )
    raw.close()
    assert cursor.lastrowid is not None
    return cursor.lastrowid


DAMAGE = [
    pytest.param("msgpack", "xx", "was written with codec 'msgpack'", id="unknown-codec"),
    pytest.param("json", "{oops", "is not valid JSON", id="not-json"),
    pytest.param("json", "[" * 100_000 + "]" * 100_000, "is not valid JSON", id="too-deep"),
]


@pytest.mark.parametrize(("codec", "payload", "said"), DAMAGE)
async def test_every_damaged_record_is_a_corrupt_journal_naming_its_key_and_seq(
    db_path: Path, codec: str, payload: str, said: str
) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
    seq = _damage(db_path, "turn/1", codec, payload)
    async with await SQLiteStore.open(db_path) as store:
        with pytest.raises(CorruptJournal, match=f"record 'turn/1' of run 'r' {said}") as loaded:
            await store.load("r")
        with pytest.raises(CorruptJournal) as got:
            await store.get("r", "turn/1")
    assert (loaded.value.run_id, loaded.value.key, loaded.value.seq) == ("r", "turn/1", seq)
    assert f"(seq {seq})" in str(loaded.value)
    assert (got.value.key, got.value.seq) == ("turn/1", seq)
    assert loaded.value.transient is False


async def test_a_damaged_record_reaches_a_journal_caller_as_a_corrupt_journal(
    db_path: Path,
) -> None:
    async with Journal(db_path) as journal:
        await journal.store.create_run("r")
    _damage(db_path, "start", "json", "{oops")
    async with Journal(db_path) as journal:
        with pytest.raises(CorruptJournal, match="record 'start' of run 'r' is not valid JSON"):
            await journal.state("r")


def test_the_category_is_a_storage_error_and_keeps_the_two_older_matches() -> None:
    """Code that matched FormatError (a bad codec) or ProtocolError (bad JSON) still does."""
    error = CorruptJournal("damaged", run_id="r", key="k")
    assert isinstance(error, StorageError) and isinstance(error, BideError)
    assert isinstance(error, FormatError) and isinstance(error, ProtocolError)
    assert error.seq is None and str(error) == "damaged"


async def test_a_run_in_an_unknown_format_is_a_format_error_not_a_corrupt_journal(
    db_path: Path,
) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
    raw = sqlite3.connect(db_path)
    with raw:
        raw.execute("UPDATE bide_records SET payload = '{\"format\": 99}' WHERE key = 'header'")
    raw.close()
    async with await SQLiteStore.open(db_path) as store:
        with pytest.raises(FormatError, match="format 99") as refused:
            await store.load("r")
    assert not isinstance(refused.value, CorruptJournal)


@pytest.mark.parametrize(("codec", "payload", "said"), DAMAGE[:2])
async def test_a_worker_skips_a_run_with_a_corrupt_record_once_and_does_not_retry_it(
    db_path: Path, codec: str, payload: str, said: str
) -> None:
    """Driving it again would fail alike: it is reported, like any run the worker cannot drive."""
    agent = Agent(model=ScriptedModel([{"text": "done"}]))
    async with Journal(db_path) as journal:
        await agent.submit("r", "go", journal=journal)
    raw = sqlite3.connect(db_path)
    with raw:
        raw.execute(
            "UPDATE bide_records SET codec = ?, payload = ? WHERE run_id = 'r' AND key = 'start'",
            (codec, payload),
        )
    raw.close()
    async with Journal(db_path) as journal, Worker(journal, agent=agent, poll=0.02) as worker:
        await asyncio.sleep(0.5)
    assert worker.claimed == 1
    assert list(worker.skipped) == ["r"]
    assert worker.skipped["r"].startswith(f"CorruptJournal: record 'start' of run 'r' {said}")


async def test_a_worker_skips_a_halted_run_with_a_corrupt_record_instead_of_reconciling_it(
    db_path: Path,
) -> None:
    async def lookup(attempt: Attempt) -> Unknown:
        return Unknown("the provider does not answer")

    @tool(reconcile=lookup)
    async def charge(amount: int) -> None:
        """The provider takes it and the answer is lost."""
        raise ToolOutcomeUnknown("connection reset after sending")

    script = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]
    agent = Agent(model=ScriptedModel(script), tools=[charge])
    async with Journal(db_path) as journal:
        assert (await agent.run("r", "go", journal=journal)).status is RunStatus.HALTED
    raw = sqlite3.connect(db_path)
    with raw:
        raw.execute("UPDATE bide_records SET payload = '{oops' WHERE key = 'start'")
    raw.close()
    async with Journal(db_path) as journal, Worker(journal, agent=agent, poll=0.02) as worker:
        await asyncio.sleep(0.5)
    assert list(worker.skipped) == ["r"]
    assert worker.skipped["r"].startswith("CorruptJournal: record 'start' of run 'r' is not valid")
