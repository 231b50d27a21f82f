"""A real provider adapter streams its text to whoever follows the run (``runtime.events``):
live ``text_delta`` events, before the journaled turn that holds the whole text."""

from __future__ import annotations

from pathlib import Path

from runtime import Agent, Journal
from runtime.events import TextDelta, TurnRecorded
from tests.adapters.models.conftest import Dialect
from tests.adapters.models.provider_server import ProviderServer


async def test_the_model_s_text_reaches_a_follower_as_live_deltas(
    server: ProviderServer, dialect: Dialect, tmp_path: Path
) -> None:
    server.script(dialect.text_reply())
    agent = Agent(model=dialect.make(), name="talker")
    async with Journal(tmp_path / "bide.db") as journal:
        seen = [e async for e in agent.stream("t-1", "hi", journal=journal)]
    deltas = [e for e in seen if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "done"
    assert all(d.live and d.n == 1 for d in deltas)
    turn = next(e for e in seen if isinstance(e, TurnRecorded))
    assert turn.text == "done" and seen.index(deltas[-1]) < seen.index(turn)
