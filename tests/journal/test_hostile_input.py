"""What hostile or broken input must never do to a journal: kill the writer, hang a run, be lost."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    Journal,
    Resolution,
    RunStatus,
    Safety,
    StorageError,
    ToolContext,
    tool,
)
from runtime.errors import ConfigError, ProtocolError
from runtime.journal import SQLiteStore
from runtime.jsontext import MAX_DEPTH, unstorable
from runtime.store.sqlite import writer as W
from runtime.testing import ScriptedModel
from tests.helpers import Ledger, call, make_tools


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"x": value}
    return value


async def test_a_lone_surrogate_is_refused_naming_the_field_and_the_writer_stays_alive(
    store: SQLiteStore,
) -> None:
    await store.create_run("r")
    with pytest.raises(StorageError, match=r"payload\.a\.b: text that is not valid Unicode"):
        await store.append("r", "k1", "t", {"a": {"b": "go \ud800"}})
    appended = await asyncio.wait_for(store.append("r", "k2", "t", {"ok": "\u00e9"}), 5)
    assert appended.won and appended.record is not None
    assert [r.key for r in await store.load("r")] == ["header", "k2"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("\udcff", "value: text that is not valid Unicode"),
        ({"k\ud800": 1}, "text that is not valid Unicode"),
        ([1, float("nan")], "value[1]: nan"),
        ({(1, 2): "a"}, "value: a key that is not a string (tuple)"),
        (nested(MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep"),
        (object(), "value: object is not JSON"),
    ],
)
def test_unstorable_names_what_cannot_be_journaled(value: Any, problem: str) -> None:
    found = unstorable(value)
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "value", ["plain", "\u00e9\u4e2d\U0001f600", {"a": [1, 2.5, None, True]}, nested(MAX_DEPTH)]
)
def test_storable_values_pass(value: Any) -> None:
    assert unstorable(value) is None


async def test_when_the_writer_breaks_every_waiter_fails_and_new_work_is_refused(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create_run("r")

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the batch logic")

    monkeypatch.setattr(W, "apply", broken)
    waiters = [store.append("r", f"k{i}", "t", {"i": i}) for i in range(20)]
    outcomes = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 10)
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    monkeypatch.undo()
    with pytest.raises(StorageError, match="the writer stopped after an unexpected RuntimeError"):
        await asyncio.wait_for(store.append("r", "later", "t", {}), 5)


async def test_a_hundred_runs_finish_while_one_model_sends_a_lone_surrogate(
    journal: Journal,
) -> None:
    ledger = Ledger()
    tools = make_tools(ledger)

    def agent(note: str) -> Agent:
        script = [
            {"tool_calls": [call("c1", "charge", customer=note, amount=5)]},
            {"text": "done"},
        ]
        return Agent(model=ScriptedModel(script), tools=list(tools.values()))

    runs = [agent("ann").run(f"r{i}", "go", journal=journal) for i in range(100)]
    runs.append(agent("bad \ud800").run("hostile", "go", journal=journal))
    outcomes = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 60)
    hostile = outcomes.pop()
    assert isinstance(hostile, ProtocolError)
    assert "turn 1 cannot be journaled" in str(hostile) and "arguments.customer" in str(hostile)
    assert all(o.status is RunStatus.COMPLETED for o in outcomes), outcomes
    assert ledger.count("charge") == 100
    assert (await journal.require("hostile")).turns == []


async def test_a_side_effect_whose_result_is_not_valid_unicode_is_recorded_as_ran(
    journal: Journal,
) -> None:
    fired = []

    @tool
    async def send(to: str) -> dict[str, str]:
        """Send a message; the provider answers with undecodable bytes."""
        fired.append(to)
        return {"receipt": b"ok \xff".decode("utf-8", "surrogateescape")}

    script = [{"tool_calls": [call("c1", "send", to="bob")]}, {"text": "sent"}]
    result = await Agent(model=ScriptedModel(script), tools=[send]).run("r", "go", journal=journal)
    assert result.status is RunStatus.COMPLETED and fired == ["bob"]
    (record,) = [r for r in (await journal.require("r")).records if r.kind == "result"]
    assert record.payload["outcome"] == "error"
    assert record.payload["error"]["type"] == "unrecordable_result"
    assert (
        "send ran, but its result cannot be journaled: result.receipt"
        in (record.payload["error"]["message"])
    )
    again = await Agent(model=ScriptedModel(script), tools=[send]).resume("r", journal=journal)
    assert again.status is RunStatus.COMPLETED and fired == ["bob"]


async def test_an_input_of_undecodable_argv_bytes_is_refused_before_anything_is_written(
    journal: Journal,
) -> None:
    agent = Agent(model=ScriptedModel([{"text": "hi"}]))
    with pytest.raises(
        ConfigError, match="cannot journal its input: text that is not valid Unicode"
    ):
        await agent.run("r", b"go \xff".decode("utf-8", "surrogateescape"), journal=journal)
    assert await journal.state("r") is None


async def test_operator_values_that_cannot_be_stored_are_refused_by_resolve_and_answer(
    journal: Journal,
) -> None:
    ledger = Ledger()

    @tool
    async def charge(amount: int) -> dict[str, int]:
        """A charge that never answers (the process is cut off)."""
        ledger.executions.append(("charge", {}, None))
        raise asyncio.CancelledError

    script = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]
    with pytest.raises(asyncio.CancelledError):
        await Agent(model=ScriptedModel(script), tools=[charge]).run("r", "go", journal=journal)
    with pytest.raises(ConfigError, match=r"resolution: resolution\.value: text that is not"):
        await journal.resolve("r", "c1", Resolution.succeeded("\ud800"))
    with pytest.raises(ConfigError, match="nested more than"):
        await journal.resolve("r", "c1", Resolution.succeeded(nested(MAX_DEPTH + 5)))
    with pytest.raises(ConfigError, match="evidence"):
        await journal.resolve("r", "c1", Resolution.not_executed(), evidence="\udcff")
    assert await journal.resolve("r", "c1", Resolution.succeeded({"ok": True}), by="ops")


async def test_a_model_turn_nested_too_deeply_is_refused_and_the_run_can_resume(
    journal: Journal,
) -> None:
    ledger = Ledger()
    tools = list(make_tools(ledger).values())
    deep = [{"tool_calls": [{"id": "c1", "name": "lookup", "arguments": nested(MAX_DEPTH + 5)}]}]
    with pytest.raises(ProtocolError, match="nested more than"):
        await Agent(model=ScriptedModel(deep), tools=tools).run("r", "go", journal=journal)
    good = [{"tool_calls": [call("c1", "lookup", customer="ann")]}, {"text": "found"}]
    result = await Agent(model=ScriptedModel(good), tools=tools).resume("r", journal=journal)
    assert result.status is RunStatus.COMPLETED


async def test_an_over_deep_record_written_by_another_program_reads_as_damaged(
    db_path: Path,
) -> None:
    async with Journal(db_path) as journal:
        await journal.store.create_run("r")
    conn = sqlite3.connect(db_path)
    text = "[" * 100_000 + "]" * 100_000
    with conn:
        conn.execute(
            "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
            "VALUES ('r', 'start', 'start', 'json', ?, 0)",
            (text,),
        )
    conn.close()
    async with Journal(db_path) as journal:
        with pytest.raises(ProtocolError, match="record 'start' of run 'r' is not valid JSON"):
            await journal.state("r")


async def test_a_result_commit_waits_out_a_lock_held_longer_than_the_busy_timeout(
    db_path: Path,
) -> None:
    """The one record that must not be lost is retried with backoff while another program
    holds the write lock."""
    released = asyncio.Event()
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)

    @tool(safety=Safety.SIDE_EFFECT)
    async def charge(amount: int) -> dict[str, int]:
        """A charge during which another program locks the journal for a while."""
        holder.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(
            1.0, lambda: (holder.execute("COMMIT"), released.set())
        )
        return {"charged": amount}

    script = [{"tool_calls": [call("c1", "charge", amount=5)]}, {"text": "done"}]
    async with Journal(db_path, busy_timeout_ms=200) as journal:
        agent = Agent(model=ScriptedModel(script), tools=[charge])
        result = await asyncio.wait_for(agent.run("r", "go", journal=journal), 30)
        assert released.is_set()
        assert result.status is RunStatus.COMPLETED
        state = await journal.require("r")
        assert state.calls["c1"].result is not None
        assert state.calls["c1"].result.payload["value"] == {"charged": 5}
    holder.close()


def test_a_journal_payload_read_back_is_identical(tmp_path: Path) -> None:
    """Whatever is accepted is read back exactly (no silent replacement of characters)."""
    value = {"t": "\u202e\u0000\x1f\U0001f600 \u00e9", "n": [-0.0, 1e308, 2**63], "d": nested(50)}

    async def go() -> Any:
        async with Journal(tmp_path / "j.db") as journal:
            await journal.store.create_run("r")
            await journal.store.append("r", "k", "t", value)
        async with Journal(tmp_path / "j.db") as journal:
            return (await journal.store.get("r", "k")).payload  # type: ignore[union-attr]

    assert json.dumps(asyncio.run(go()), sort_keys=True) == json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("victim", ["-wal", ""])
async def test_a_writer_whose_file_is_deleted_under_it_stops_instead_of_writing_blind(
    db_path: Path, victim: str
) -> None:
    async with Journal(db_path) as journal:
        await journal.store.create_run("r")
        await journal.store.append("r", "k1", "t", {})
        Path(f"{db_path}{victim}").unlink()
        with pytest.raises(StorageError, match=r"was deleted while this process had it open"):
            await asyncio.wait_for(journal.store.append("r", "k2", "t", {}), 5)
        with pytest.raises(StorageError, match="was deleted"):
            await asyncio.wait_for(journal.store.append("r", "k3", "t", {}), 5)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_thirty_runs_finish_while_one_model_sends_a_nul_in_a_call_id(
    journal: Journal,
) -> None:
    """A value a backend cannot store costs only the run that sent it, never its batch."""
    ledger = Ledger()
    tools = make_tools(ledger)

    def agent(call_id: str) -> Agent:
        script = [
            {"tool_calls": [call(call_id, "charge", customer="ann", amount=5)]},
            {"text": "done"},
        ]
        return Agent(model=ScriptedModel(script), tools=list(tools.values()))

    runs = [agent("c1").run(f"r{i}", "go", journal=journal) for i in range(30)]
    runs.append(agent("c\x001").run("hostile", "go", journal=journal))
    outcomes = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 60)
    hostile = outcomes.pop()
    assert isinstance(hostile, ProtocolError), hostile
    assert "turn 1 cannot be journaled" in str(hostile) and "NUL" in str(hostile)
    assert all(not isinstance(o, BaseException) for o in outcomes), outcomes
    assert all(o.status is RunStatus.COMPLETED for o in outcomes), outcomes
    assert ledger.count("charge") == 30
    assert (await journal.require("hostile")).turns == []


async def test_an_interrupt_key_with_a_nul_is_refused_as_misuse_naming_the_key(
    journal: Journal,
) -> None:
    @tool(safety=Safety.READ_ONLY)
    async def quote(context: ToolContext) -> int:
        """Ask a person for a price under a key no journal can store."""
        return int(await context.interrupt("pri\x00ce", "What price?", expect=int))

    script = [{"tool_calls": [call("c1", "quote")]}, {"text": "quoted"}]
    with pytest.raises(ConfigError, match=r"interrupt key must be .* without NUL: 'pri\\x00ce'"):
        await Agent(model=ScriptedModel(script), tools=[quote]).run("r", "go", journal=journal)
    assert not [r for r in (await journal.require("r")).records if r.kind == "interrupt"]


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (nested(5000), f"nested more than {MAX_DEPTH} levels deep"),
        ({"at": object()}, "result.at: object is not JSON"),
    ],
)
async def test_a_side_effect_returning_what_cannot_be_converted_is_recorded_as_ran(
    journal: Journal, reply: Any, problem: str
) -> None:
    """Not a halt ("it may have acted"): the tool returned, so it ran; its value is refused."""
    fired = []

    @tool
    async def send(to: str) -> Any:
        """Send a message; the provider answers with what no journal keeps."""
        fired.append(to)
        return reply

    script = [{"tool_calls": [call("c1", "send", to="bob")]}, {"text": "sent"}]
    result = await Agent(model=ScriptedModel(script), tools=[send]).run("r", "go", journal=journal)
    assert result.status is RunStatus.COMPLETED and fired == ["bob"]
    (record,) = [r for r in (await journal.require("r")).records if r.kind == "result"]
    assert record.payload["error"]["type"] == "unrecordable_result"
    assert problem in record.payload["error"]["message"]
