"""Sessions (``runtime.sessions``): many runs, one conversation, one message at a time, across
processes; the model of each message sees the earlier ones, and a resume sees the same. On
SQLite and PostgreSQL (``tests/conftest.py``)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime import (
    Agent,
    AssistantTurn,
    Journal,
    RunStatus,
    Safety,
    Session,
    SessionBusy,
    ToolCall,
    ToolSpec,
    Worker,
    tool,
)
from runtime import records as R
from runtime.errors import ConfigError
from runtime.journal import Resolution
from runtime.messages import Message, ToolResultMessage, UserMessage
from runtime.runs import list_page
from runtime.sessions import Summary, last_exchanges, messages_of, token_budget
from tests.conftest import ROOT, child_env


class Echo:
    """Asks for ``note`` once per message, then answers naming how many messages it saw;
    keeps every conversation it was shown. Dies (as its process would) at request ``die_at``."""

    def __init__(self, die_at: int | None = None):
        self.shown: list[list[Message]] = []
        self.die_at = die_at

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        self.shown.append(list(messages))
        if len(self.shown) == self.die_at:
            raise SystemExit("killed")
        last = messages[-1]
        if isinstance(last, UserMessage):
            n = len(self.shown)
            return AssistantTurn(tool_calls=(ToolCall(f"n{n}-{len(messages)}", "note", {}),))
        return AssistantTurn(text=f"saw {len(messages)}")


@tool(safety=Safety.READ_ONLY)
async def note() -> str:
    """Read a note."""
    return "a note"


@tool
async def charge() -> str:
    """A side effect whose outcome is lost."""
    raise RuntimeError("connection reset")


async def test_a_message_sees_the_earlier_ones_with_their_tool_results(
    journal: Journal,
) -> None:
    model = Echo()
    agent = Agent(model=model, tools=[note])
    first = await agent.run("m1", "hello", session="t-42", journal=journal)
    second = await agent.run("m2", "again", session="t-42", journal=journal)
    assert (first.output, second.output) == ("saw 3", "saw 7")
    shown = model.shown[2]  # the second message's first request
    assert [type(m).__name__ for m in shown] == [
        "UserMessage",
        "AssistantTurn",
        "ToolResultMessage",
        "AssistantTurn",
        "UserMessage",
    ]
    assert shown[0] == UserMessage("hello") and shown[-1] == UserMessage("again")
    assert isinstance(shown[2], ToolResultMessage) and shown[2].content == "a note"
    assert [m.run_id for m in await messages_of(journal.store, "t-42")] == ["m1", "m2"]
    start = await journal.store.get("m2", R.START)
    assert start is not None and start.payload["session"]["after"] == ["m1"]
    # A session's own journal is no run: list leaves it out.
    listed = await list_page(journal)
    assert sorted(r.run_id for r in listed.rows) == ["m1", "m2"]


async def test_a_halted_message_holds_the_session_until_it_ends(journal: Journal) -> None:
    model = Echo()
    halting = Agent(
        model=_Script([AssistantTurn(tool_calls=(ToolCall("c1", "charge", {}),))]),
        tools=[charge],
    )
    halted = await halting.run("m1", "charge", session="s", journal=journal)
    assert halted.status is RunStatus.HALTED
    agent = Agent(model=model, tools=[note])
    with pytest.raises(SessionBusy) as busy:
        await agent.run("m2", "next", session="s", journal=journal)
    assert (busy.value.session, busy.value.holder) == ("s", "m1")
    assert "has not ended" in str(busy.value)
    assert model.shown == []  # refused before anything was asked
    await journal.resolve("m1", "c1", Resolution.succeeded("charged"), by="ann")
    halting_done = Agent(
        model=_Script(
            [AssistantTurn(tool_calls=(ToolCall("c1", "charge", {}),)), AssistantTurn("ok")]
        ),
        tools=[charge],
    )
    assert (await halting_done.resume("m1", journal=journal)).status is RunStatus.COMPLETED
    after = await agent.run("m2", "next", session="s", journal=journal)
    assert after.status is RunStatus.COMPLETED
    assert model.shown[0][:4] == [
        UserMessage("charge"),
        AssistantTurn(tool_calls=(ToolCall("c1", "charge", {}),), finish_reason="stop"),
        ToolResultMessage("c1", "charge", "charged", False),
        AssistantTurn("ok"),
    ]


async def test_cancelling_a_halted_message_frees_the_session(journal: Journal) -> None:
    halting = Agent(
        model=_Script([AssistantTurn(tool_calls=(ToolCall("c1", "charge", {}),))]),
        tools=[charge],
    )
    assert (await halting.run("m1", "charge", session="s", journal=journal)).status is (
        RunStatus.HALTED
    )
    await journal.cancel("m1", by="ann")
    model = Echo()
    result = await Agent(model=model, tools=[note]).run("m2", "next", session="s", journal=journal)
    assert result.status is RunStatus.COMPLETED
    # The cancelled message shows its input only: its one turn never got its result.
    assert model.shown[0][:2] == [UserMessage("charge"), UserMessage("next")]
    # Resolved after the cancel, its result does not change what later messages see.
    await journal.resolve("m1", "c1", Resolution.succeeded("charged"), by="ann")
    again = Echo()
    await Agent(model=again, tools=[note]).run("m3", "third", session="s", journal=journal)
    assert again.shown[0][:2] == [UserMessage("charge"), UserMessage("next")]


async def test_a_message_resumed_after_a_crash_shows_the_model_the_same_history(
    journal: Journal,
) -> None:
    agent = Agent(model=Echo(), tools=[note])
    await agent.run("m1", "hello", session="s", journal=journal)
    dying = Echo(die_at=2)  # the second message's second request
    with pytest.raises(SystemExit):
        await Agent(model=dying, tools=[note]).run("m2", "again", session="s", journal=journal)
    before = dying.shown[0]
    fresh = Echo()
    result = await Agent(model=fresh, tools=[note]).resume("m2", journal=journal)
    assert result.status is RunStatus.COMPLETED
    (resumed,) = fresh.shown
    assert resumed[: len(before)] == before
    assert len(resumed) == len(before) + 2  # and the turn and result recorded before the crash


async def test_the_history_hook_chooses_what_the_model_sees_and_binds_the_resume(
    journal: Journal,
) -> None:
    agent = Agent(model=Echo(), tools=[note])
    for n in (1, 2):
        await agent.run(f"m{n}", f"message {n}", session="s", journal=journal)
    dying = Echo(die_at=2)
    lean = Agent(model=dying, tools=[note], session_history=last_exchanges(1))
    with pytest.raises(SystemExit):
        await lean.run("m3", "message 3", session="s", journal=journal)
    assert dying.shown[0][0] == UserMessage("message 2")  # message 1 is left out
    assert dying.shown[0][-1] == UserMessage("message 3")
    # Resumed with another hook, the model would see another history: refused.
    other = Agent(model=Echo(), tools=[note], session_history=last_exchanges(2))
    with pytest.raises(ConfigError, match="not what its model was shown"):
        await other.resume("m3", journal=journal)
    done = await Agent(model=Echo(), tools=[note], session_history=last_exchanges(1)).resume(
        "m3", journal=journal
    )
    assert done.status is RunStatus.COMPLETED


def test_token_budget_keeps_the_latest_whole_exchanges() -> None:
    exchanges: list[Message] = [
        UserMessage("a" * 400),
        AssistantTurn("x"),
        UserMessage("b" * 40),
        AssistantTurn("y"),
    ]
    assert token_budget(60)(exchanges) == exchanges[2:]  # about 180 characters
    assert token_budget(1000)(exchanges) == exchanges
    assert token_budget(1)(exchanges) == []


async def test_a_session_handle_sends_messages_in_order(journal: Journal) -> None:
    session = Session("h", journal)
    agent = Agent(model=Echo(), tools=[note])
    first = await session.send(agent, "h1", "one")
    second = await session.send(agent, "h2", "two")
    assert (first.output, second.output) == ("saw 3", "saw 7")
    assert await session.runs() == ["h1", "h2"]
    with pytest.raises(ConfigError, match="session name"):
        Session("", journal)


async def test_session_names_and_run_ids_are_checked(journal: Journal) -> None:
    agent = Agent(model=Echo(), tools=[note])
    with pytest.raises(ConfigError, match="name sessions"):
        await agent.run("session:x", "hi", journal=journal)
    with pytest.raises(ConfigError, match="session name"):
        await agent.run("m1", "hi", session="", journal=journal)
    await agent.run("solo", "hi", journal=journal)
    with pytest.raises(ConfigError, match="not a message of session"):
        await agent.run("solo", "hi", session="s", journal=journal)


class _Script:
    """A model that answers turn n with the n-th of its turns (counting this run's turns)."""

    def __init__(self, turns: list[AssistantTurn]):
        self.turns = turns

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        return self.turns[sum(isinstance(m, AssistantTurn) for m in messages[start:])]


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from runtime import Agent, AssistantTurn, Journal, Safety, ToolCall, UserMessage, tool

    @tool(safety=Safety.READ_ONLY)
    async def slow() -> str:
        '''Take a while.'''
        await asyncio.sleep(0.4)
        return "slept"

    class Model:
        async def complete(self, system_prompt, messages, tools):
            if isinstance(messages[-1], UserMessage):
                call = ToolCall(sys.argv[2] + "-c", "slow", {})
                return AssistantTurn(tool_calls=(call,))
            return AssistantTurn(text=f"saw {len(messages)}")

    async def main():
        async with Journal(sys.argv[1]) as journal:
            agent = Agent(model=Model(), tools=[slow])
            result = await agent.run(
                sys.argv[2], "from " + sys.argv[2], session="shared", journal=journal, wait=60
            )
            print(result.output)

    asyncio.run(main())
    """
)


async def test_two_processes_sending_to_one_session_never_interleave(
    journal: Journal, backend: str, request: pytest.FixtureRequest
) -> None:
    where: str | Path = (
        request.getfixturevalue("pg_url")
        if backend == "postgres"
        else request.getfixturevalue("db_path")
    )
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            str(where),
            run_id,
            cwd=ROOT,
            env=child_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for run_id in ("a", "b")
    ]
    outs = [await asyncio.wait_for(c.communicate(), 120) for c in children]
    for child, (_, err) in zip(children, outs, strict=True):
        assert child.returncode == 0, err.decode()[-2000:]
    order = [m.run_id for m in await messages_of(journal.store, "shared")]
    assert sorted(order) == ["a", "b"]
    answers = {run_id: out.decode().strip() for run_id, (out, _) in zip("ab", outs, strict=True)}
    # The first saw its own exchange; the second saw the first's whole exchange before its own.
    assert (answers[order[0]], answers[order[1]]) == ("saw 3", "saw 7")
    first_end = await journal.store.get(order[0], R.END)
    second_start = await journal.store.get(order[1], R.START)
    assert first_end is not None and second_start is not None
    assert second_start.seq > first_end.seq or second_start.created_ms >= first_end.created_ms


class Summarizing(Echo):
    """Echo, which also answers a request for a summary, naming how many messages it read."""

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.text == Summary().instruction:
            self.shown.append(list(messages))
            if len(self.shown) == self.die_at:
                raise SystemExit("killed")
            return AssistantTurn(text=f"they talked ({len(messages) - 1} messages)")
        return await super().complete(system_prompt, messages, tools)


async def test_a_summary_the_model_writes_is_journaled_and_read_back_on_resume(
    journal: Journal,
) -> None:
    plain = Agent(model=Echo(), tools=[note])
    for n in (1, 2):
        await plain.run(f"m{n}", f"message {n}", session="s", journal=journal)
    dying = Summarizing(die_at=3)  # the summary, the first turn, then dies asking the second
    summed = Agent(model=dying, tools=[note], session_history=Summary(keep=1))
    with pytest.raises(SystemExit):
        await summed.run("m3", "message 3", session="s", journal=journal)
    asked, first_turn = dying.shown[0], dying.shown[1]
    assert asked[0] == UserMessage("message 1") and len(asked) == 5  # message 1's exchange
    assert first_turn[0] == UserMessage(
        "A summary of the earlier conversation: they talked (4 messages)"
    )
    assert first_turn[1] == UserMessage("message 2")
    record = await journal.store.get("m3", "summary")
    assert record is not None and record.payload["covers"] == 1
    fresh = Summarizing()
    resumed = await Agent(model=fresh, tools=[note], session_history=Summary(keep=1)).resume(
        "m3", journal=journal
    )
    assert resumed.status is RunStatus.COMPLETED
    (again,) = fresh.shown  # no second summary: it was read from the journal
    assert again[: len(first_turn)] == first_turn


async def test_submitted_messages_are_driven_by_a_worker_in_order(journal: Journal) -> None:
    model = Echo()
    agent = Agent(model=model, tools=[note])
    await agent.submit("w1", "first", journal=journal, session="queued")
    with pytest.raises(SessionBusy):  # submitted, not ended: it holds the session
        await agent.submit("w2", "second", journal=journal, session="queued")
    async with Worker(journal, agent=agent, poll=0.02):
        await _until_completed(journal, "w1")
    await agent.submit("w2", "second", journal=journal, session="queued")
    async with Worker(journal, agent=agent, poll=0.02):
        await _until_completed(journal, "w2")
    assert model.shown[-1][0] == UserMessage("first")  # the second saw the first
    assert [m.run_id for m in await messages_of(journal.store, "queued")] == ["w1", "w2"]


async def _until_completed(journal: Journal, run_id: str) -> None:
    async with asyncio.timeout(30):
        while await journal.status(run_id) != "completed":
            await asyncio.sleep(0.02)
