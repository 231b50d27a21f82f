"""ScriptedModel: a product feature for users' own tests."""

from __future__ import annotations

import json
from pathlib import Path

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
from runtime.testing import MemoryStore, ScriptedModel
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
