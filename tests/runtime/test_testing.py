"""``runtime.testing``: a product feature for users' own tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    AssistantTurn,
    ConfigError,
    Journal,
    RunStatus,
    StorageError,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from runtime.testing import (
    FailingStore,
    FunctionModel,
    MemoryStore,
    ScriptedModel,
    capture_events,
)
from tests.helpers import Ledger, call, make_tools

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 3}}], "text": "paying"},
    {"text": "paid"},
]


async def test_the_answer_depends_on_the_conversation_not_on_how_often_it_was_asked() -> None:
    model = ScriptedModel(SCRIPT)
    first = await model.complete(None, [UserMessage("go")], [])
    assert first.tool_calls == (ToolCall("c1", "charge", {"amount": 3}),)
    assert first.text == "paying" and first.finish_reason == "tool_calls"
    # A fresh instance (a resumed process) given the same conversation answers the same.
    conversation = [UserMessage("go"), first, ToolResultMessage("c1", "charge", {"ok": 1})]
    assert (await ScriptedModel(SCRIPT).complete(None, conversation, [])).text == "paid"
    assert (await model.complete(None, [UserMessage("go")], [])) == first
    assert model.calls == 2


async def test_a_script_read_from_a_file_is_the_same_script(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    model = ScriptedModel.from_file(path)
    assert model.turns == ScriptedModel(SCRIPT).turns


async def test_asking_past_the_end_of_the_script_is_a_config_error() -> None:
    model = ScriptedModel([{"text": "only"}])
    with pytest.raises(ConfigError, match="1 turns"):
        await model.complete(None, [UserMessage("go"), AssistantTurn(text="only")], [])


@pytest.mark.parametrize(
    "script",
    ["not a list", [1], [{}], [{"tool_calls": [{"name": "x"}]}], [{"text": 3}], [{"txt": "x"}]],
)
def test_a_malformed_script_is_a_config_error(script: object) -> None:
    with pytest.raises(ConfigError):
        ScriptedModel(script)  # type: ignore[arg-type]


def test_an_unreadable_script_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read script"):
        ScriptedModel.from_file(tmp_path / "missing.json")


async def test_a_memory_store_plugs_into_a_journal_and_keeps_the_drive_s_rules() -> None:
    """The public seam: an agent drives a run on a Journal over a MemoryStore, resumes replay
    without running anything again, and what SQLite would refuse is refused here too."""
    ledger = Ledger()
    tools = list(make_tools(ledger).values())
    script = [{"tool_calls": [call("c1", "charge", customer="ann", amount=5)]}, {"text": "done"}]
    async with Journal(store=MemoryStore()) as journal:
        first = await Agent(model=ScriptedModel(script), tools=tools).run(
            "r", "go", journal=journal
        )
        again = await Agent(model=ScriptedModel(script), tools=tools).run(
            "r", "go", journal=journal
        )
        assert (first.status, again.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED)
        assert ledger.count("charge") == 1
        row = await journal.run_row("r")
        assert row is not None and row.status == "completed"
        with pytest.raises(StorageError, match="not valid Unicode"):
            await journal.store.append("r", "x", "t", {"bad": "\ud800"})


async def test_a_function_model_answers_from_what_the_model_is_shown() -> None:
    """``FunctionModel``: the answer is the function's, sync or async, from the conversation."""
    ledger = Ledger()
    tools = list(make_tools(ledger).values())

    def answer(system: str | None, messages: Any, specs: Any) -> dict[str, Any]:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            assert {s.name for s in specs} == {"lookup", "upsert", "charge"}
            return {"tool_calls": [call("c1", "charge", customer="ann", amount=7)]}
        return {"text": f"charged {results[0].content['charged']}"}

    async def answer_later(system: str | None, messages: Any, specs: Any) -> AssistantTurn:
        return AssistantTurn(text=f"{len(messages)} messages")

    model = FunctionModel(answer)
    async with Journal(store=MemoryStore()) as journal:
        result = await Agent(model=model, tools=tools).run("r", "go", journal=journal)
        assert (result.status, result.output) == (RunStatus.COMPLETED, "charged 7")
        assert model.calls == 2 and ledger.count("charge") == 1
        later = await Agent(model=FunctionModel(answer_later)).run("s", "hi", journal=journal)
        assert later.output == "1 messages"
    with pytest.raises(ConfigError, match="returned int"):
        await FunctionModel(lambda *_: 3).complete(None, [UserMessage("go")], [])


SCRIPT_CHARGE = [{"tool_calls": [call("c1", "charge", customer="ann", amount=5)]}, {"text": "ok"}]


async def test_a_failing_store_fails_a_write_before_it_is_made() -> None:
    """The charge ran, its result could not be written: on resume the outcome is unknown, and
    the run halts rather than charging again."""
    ledger = Ledger()
    tools = list(make_tools(ledger).values())
    store = FailingStore(MemoryStore())
    store.fail("append", key="result/c1/1")
    async with Journal(store=store) as journal:
        agent = Agent(model=ScriptedModel(SCRIPT_CHARGE), tools=tools)
        with pytest.raises(StorageError, match="nothing written"):
            await agent.run("r", "go", journal=journal)
        assert store.failed == [("append", "r", "result/c1/1")]
        again = await agent.resume("r", journal=journal)
        assert again.status == RunStatus.HALTED and ledger.count("charge") == 1
        assert await journal.store.get("r", "result/c1/1") is None


async def test_a_failing_store_fails_a_write_after_it_is_made() -> None:
    """``after=True``: the write commits and its caller hears an error, as when a connection
    drops during a commit. The resume finds the result and charges nothing more."""
    ledger = Ledger()
    tools = list(make_tools(ledger).values())
    store = FailingStore(MemoryStore())
    store.fail("append", key="result/c1/1", after=True, error=StorageError("connection lost"))
    async with Journal(store=store) as journal:
        agent = Agent(model=ScriptedModel(SCRIPT_CHARGE), tools=tools)
        with pytest.raises(StorageError, match="connection lost"):
            await agent.run("r", "go", journal=journal)
        again = await agent.resume("r", journal=journal)
        assert again.status == RunStatus.COMPLETED and ledger.count("charge") == 1
    with pytest.raises(ConfigError, match="no method 'appendd'"):
        store.fail("appendd")


async def test_capture_events_sees_bides_log_events() -> None:
    """structlog's ``capture_logs`` does not see bide's events (bide leaves structlog's global
    configuration alone); ``capture_events`` does, with their fields."""
    with capture_events() as events:
        async with Journal(store=MemoryStore()) as journal:
            await Agent(model=ScriptedModel([{"text": "hi"}])).run("r", "go", journal=journal)
    finished = [e for e in events if e["event"] == "drive_finished"]
    assert finished and finished[0]["status"] == "completed"
    assert finished[0]["run_id"] == "r" and finished[0]["log_level"] == "info"
    assert finished[0]["logger"].startswith("runtime")
    # Outside the block nothing more is collected, and the loggers' levels are as they were.
    count = len(events)
    async with Journal(store=MemoryStore()) as journal:
        await Agent(model=ScriptedModel([{"text": "hi"}])).run("s", "go", journal=journal)
    assert len(events) == count
