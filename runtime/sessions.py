"""Sessions: a conversation of many runs, one message at a time.

A session is an ordered list of runs, each one message (``agent.run(run_id, message,
session="ticket-42", journal=...)``), kept in the journal itself: under the reserved run id
``session:<name>``, whose records ``message/<k>`` name the run of the k-th message. Those keys
are insert-if-absent, so of two processes (or machines) sending a message at once exactly one
gets slot k, and a slot is taken only once the run of slot k-1 has ended: a session never runs
two messages at once. A message whose predecessor has not ended (it runs, waits for a person, or
is halted) is refused with ``SessionBusy`` naming that run, or waits up to ``wait`` seconds for
it. A run asked to cancel holds it no more (no model turn of it can follow): the session goes
on.

The model of message k sees the earlier messages' runs as it would have seen them (each input,
then its turns with their calls' results), read from their journals, through the agent's
``session_history`` hook (``last_exchanges``, ``token_budget``, or your own deterministic
function). The run's start record pins which runs came before and a digest of what the hook
made of them, so a resumed drive shows the model exactly the same messages, or refuses to run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime import records as R
from runtime.errors import ConfigError, SessionBusy
from runtime.jsontext import unstorable_text
from runtime.messages import AssistantTurn, Message, ToolResultMessage, UserMessage
from runtime.output import as_conversation
from runtime.state import RunState
from runtime.store.protocol import Store

__all__ = [
    "SESSION_PREFIX",
    "HistoryHook",
    "Opening",
    "SessionMessage",
    "Summary",
    "claim",
    "exchanges_of",
    "last_exchanges",
    "messages_of",
    "pinned_prefix",
    "token_budget",
]

SESSION_PREFIX = "session:"
"""Run ids that start with it are sessions' own journals, never runs."""

MESSAGE = "message"
"""The kind of a session's ``message/<k>`` records."""

POLL = 0.2
"""Seconds between looks at a busy session while waiting for it."""

HistoryHook = Callable[[Sequence[Message]], Sequence[Message]]
"""What the model of a message sees of the session's earlier messages: given them all (each
exchange starting with its ``UserMessage``), the ones to show. It must be deterministic."""


@dataclass(frozen=True, slots=True)
class SessionMessage:
    """One message of a session: its place and the run that answers it."""

    k: int
    run_id: str


@dataclass(frozen=True, slots=True)
class Opening:
    """A run's place in its session, as its start record pins it."""

    session: str
    k: int
    after: tuple[str, ...]
    """The runs of the earlier messages, in order."""
    digest: str
    """The sha256 of the earlier messages as the history hook gave them to the model."""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.session, "k": self.k, "after": list(self.after), "history": self.digest}


def journal_id(session: str) -> str:
    """The reserved run id of a session's own journal; ``ConfigError`` for a bad name."""
    if (
        not isinstance(session, str)
        or not session
        or len(session) > 200
        or unstorable_text(session) is not None
    ):
        raise ConfigError(
            f"a session name is a non-empty string of at most 200 chars, without NUL: {session!r}"
        )
    return SESSION_PREFIX + session


async def messages_of(store: Store, session: str) -> list[SessionMessage]:
    """The session's messages in order (none if there is no such session)."""
    sid = journal_id(session)
    if not await store.check_run(sid):
        return []
    records = await store.load(sid, prefix=MESSAGE + "/")
    found = [SessionMessage(int(r.payload["k"]), str(r.payload["run_id"])) for r in records]
    return sorted(found, key=lambda m: m.k)


async def claim(
    store: Store,
    session: str,
    run_id: str,
    *,
    hook: HistoryHook | None,
    wait: float | None = None,
) -> Opening:
    """Take the session's next slot for ``run_id`` (or find the one it has), once the run of
    the message before has ended; ``SessionBusy`` if it has not (after ``wait`` seconds)."""
    sid = journal_id(session)
    start = await store.get(run_id, R.START) if await store.check_run(run_id) else None
    if start is not None:
        pinned = start.payload.get("session") if isinstance(start.payload, dict) else None
        if not isinstance(pinned, dict) or pinned.get("id") != session:
            raise ConfigError(
                f"run {run_id!r} exists and is not a message of session {session!r}",
                run_id=run_id,
            )
    if await store.create_run(sid):
        await store.update_index(sid, status="session")  # never claimed or listed as a run
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        found = await messages_of(store, session)
        mine = next((m for m in found if m.run_id == run_id), None)
        if mine is not None:  # a message sent before: this drive resumes it
            after = tuple(m.run_id for m in found if m.k < mine.k)
            return await _opening(store, session, mine.k, after, hook)
        if found and not await _finished(store, found[-1].run_id):
            holder = found[-1].run_id
            if deadline is None or time.monotonic() >= deadline:
                raise SessionBusy(
                    f"session {session!r} is busy: the run of its message {found[-1].k} "
                    f"({holder!r}) has not ended (it runs, waits or is halted); a session runs "
                    "one message at a time",
                    session=session,
                    holder=holder,
                    run_id=run_id,
                )
            await asyncio.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
            continue
        k = len(found) + 1
        appended = await store.append(sid, f"{MESSAGE}/{k}", MESSAGE, {"k": k, "run_id": run_id})
        if appended.won:
            return await _opening(store, session, k, tuple(m.run_id for m in found), hook)
        # Another process took slot k first: look again (its run now holds the session).


async def _finished(store: Store, run_id: str) -> bool:
    """Whether the run holds its session no more: it ended, or was asked to cancel (then no
    model turn or new attempt of it can follow)."""
    if await store.get(run_id, R.END) is not None:
        return True
    return await store.get(run_id, R.CANCEL) is not None


async def _opening(
    store: Store, session: str, k: int, after: tuple[str, ...], hook: HistoryHook | None
) -> Opening:
    shown = await _shown(store, after, hook)
    return Opening(session, k, after, digest(shown))


async def _shown(store: Store, after: Sequence[str], hook: HistoryHook | None) -> list[Message]:
    earlier: list[Message] = []
    for run_id in after:
        earlier.extend(exchange(RunState.fold(run_id, await store.load(run_id))))
    shown = list(hook(earlier)) if hook is not None else earlier
    return list(as_conversation(shown))


async def pinned_prefix(
    store: Store, pinned: Any, hook: HistoryHook | None, *, run_id: str
) -> list[Message]:
    """The earlier messages a session run's model sees, as its start record pinned them;
    ``ConfigError`` if they are no longer what it pinned (the hook changed, say)."""
    if not isinstance(pinned, dict) or not isinstance(pinned.get("after"), list):
        raise ConfigError(f"run {run_id!r}: its start record's session is malformed")
    shown = await _shown(store, [str(r) for r in pinned["after"]], hook)
    if digest(shown) != pinned.get("history"):
        raise ConfigError(
            f"run {run_id!r} of session {pinned.get('id')!r}: the earlier messages are not what "
            "its model was shown when it started (was the agent's session_history changed?); "
            "a resume must show the model the same conversation",
            run_id=run_id,
        )
    return shown


def exchange(state: RunState) -> list[Message]:
    """One finished run as the next message's model sees it: its input, then each turn whose
    calls all have results, with them. Only records before the run's cancel request (or, with
    none, its end) count, so a result that arrives later (a halted call resolved after the
    cancel) never changes what a later message was shown."""
    out: list[Message] = [UserMessage(str(state.input))]
    last = state.cancel or state.end
    cutoff = last.seq if last is not None else None
    for turn in state.turns:
        results: list[Message] = []
        for call in turn.tool_calls:
            cs = state.calls.get(call.id)
            result = cs.result if cs is not None else None
            if cs is None or result is None or (cutoff is not None and result.seq > cutoff):
                return out
            content, is_error = cs.message_content()
            results.append(ToolResultMessage(call.id, call.name, content, is_error))
        out.append(turn)
        out.extend(results)
    return out


def digest(messages: Sequence[Message]) -> str:
    encoded = [_encode(m) for m in messages]
    text = json.dumps(encoded, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _encode(message: Message) -> Any:
    if isinstance(message, UserMessage):
        return ["user", message.text]
    if isinstance(message, AssistantTurn):
        return ["assistant", message.to_json()]
    return ["tool", message.call_id, message.name, message.content, message.is_error]


def exchanges_of(messages: Sequence[Message]) -> list[list[Message]]:
    out: list[list[Message]] = []
    for message in messages:
        if isinstance(message, UserMessage) or not out:
            out.append([])
        out[-1].append(message)
    return out


def last_exchanges(n: int) -> HistoryHook:
    """Show the model the last ``n`` earlier messages of the session, each whole."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError("last_exchanges needs a count >= 0")

    def keep(messages: Sequence[Message]) -> Sequence[Message]:
        kept = exchanges_of(messages)[-n:] if n else []
        return [m for exchange in kept for m in exchange]

    return keep


def token_budget(tokens: int, *, chars_per_token: int = 4) -> HistoryHook:
    """Show the model the most recent earlier messages, each whole, whose text (as JSON) fits
    ``tokens`` at ``chars_per_token`` characters a token (an estimate, the same every time)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ConfigError("token_budget needs a number of tokens >= 0")

    def keep(messages: Sequence[Message]) -> Sequence[Message]:
        budget = tokens * chars_per_token
        kept: list[list[Message]] = []
        for exchange in reversed(exchanges_of(messages)):
            size = len(json.dumps([_encode(m) for m in exchange], ensure_ascii=False))
            if size > budget:
                break
            budget -= size
            kept.insert(0, exchange)
        return [m for exchange in kept for m in exchange]

    return keep


SUMMARY = "summary"
"""The key and kind of the record holding the summary a run's model wrote of the earlier
messages (``Summary``)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """History control: the model sees the last ``keep`` earlier messages whole, and the ones
    before them as a summary the agent's model writes (asked with ``instruction``) before the
    run's first turn, journaled in the run as a ``summary`` record: a resume reads it back and
    never asks for it again. Pass it as ``Agent(session_history=Summary(keep=2))``."""

    keep: int = 1
    instruction: str = (
        "Summarize the conversation so far in a few sentences: the facts, decisions and open "
        "questions a reader needs to carry on. Answer with the summary only."
    )
    preface: str = "A summary of the earlier conversation: "

    def __post_init__(self) -> None:
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 0:
            raise ConfigError("Summary.keep is a count >= 0")

    def __call__(self, messages: Sequence[Message]) -> Sequence[Message]:
        return messages  # what it pins is every earlier message; ``summarized`` shortens them
