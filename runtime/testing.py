"""For tests, demos and users' own tests of agents built on bide.

- ``ScriptedModel`` replays a script of turns; ``FunctionModel`` answers with a function.
- ``MemoryStore`` is a journal's store in memory; ``FailingStore`` wraps a store and fails the
  calls it is told to, before or after they reach it.
- ``capture_events()`` collects bide's log events (structlog's ``capture_logs`` does not see
  them: bide never touches structlog's global configuration).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from runtime.errors import ConfigError, StorageError
from runtime.events.hub import delta
from runtime.jsontext import unstorable
from runtime.messages import AssistantTurn, Message, ToolCall, Usage
from runtime.output import OutputSpec
from runtime.ownership import Lease, Owner
from runtime.records import Appended, Entry, Record
from runtime.store.memory import MemoryStore
from runtime.store.protocol import RunPage, RunRow, Store
from runtime.tools import ToolSpec

__all__ = [
    "FailingStore",
    "FunctionModel",
    "MemoryStore",
    "ScriptedModel",
    "capture_events",
]


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
        self._outputs: dict[int, Any] = {
            i: turn["output"]
            for i, turn in enumerate(turns)
            if isinstance(turn, Mapping) and "output" in turn
        }
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
        *,
        output: OutputSpec | None = None,
    ) -> AssistantTurn:
        """The scripted turn. A turn ``{"output": value}`` answers an agent with an
        ``output_type`` by calling its output tool with ``value`` (``output=`` says how)."""
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
        if index not in self._outputs:
            return turn
        if output is None:
            raise ConfigError(
                f"script turn {index + 1} gives an 'output', but the agent has no output_type"
            )
        call = ToolCall(f"output-{index + 1}", output.name, output.wrap(self._outputs[index]))
        return AssistantTurn(turn.text, (call,), turn.usage, "tool_calls")


def _parse_turn(index: int, turn: Mapping[str, Any]) -> AssistantTurn:
    where = f"script turn {index + 1}"
    if not isinstance(turn, Mapping):
        raise ConfigError(f"{where}: a turn is an object with 'text' and/or 'tool_calls'")
    unknown = set(turn) - {"text", "tool_calls", "usage", "output"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    if "output" in turn:
        if turn.get("tool_calls"):
            raise ConfigError(f"{where}: a turn gives 'output' or 'tool_calls', not both")
        problem = unstorable(turn["output"], name="output")
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"{where}: 'text' must be a string")
    calls = []
    for call in turn.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not {"id", "name"} <= set(call):
            raise ConfigError(f"{where}: each tool call needs 'id' and 'name'")
        calls.append(ToolCall(str(call["id"]), str(call["name"]), call.get("arguments", {})))
    if text is None and not calls and "output" not in turn:
        raise ConfigError(f"{where}: a turn needs 'text' or 'tool_calls'")
    usage = turn.get("usage")
    return AssistantTurn(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage.from_json(usage if isinstance(usage, Mapping) else None),
        finish_reason="tool_calls" if calls else "stop",
    )


TurnFunction = Callable[
    [str | None, Sequence[Message], Sequence[ToolSpec]],
    AssistantTurn | Mapping[str, Any] | Awaitable[AssistantTurn | Mapping[str, Any]],
]


class FunctionModel:
    """A Model whose answers a function gives: ``fn(system_prompt, messages, tools)`` returns
    (or, if it is async, resolves to) an ``AssistantTurn`` or a turn as ``ScriptedModel``
    reads one (``{"text": ...}``, ``{"tool_calls": [...]}``). For a test whose answer depends
    on what the model is shown. ``calls`` counts the requests it answered."""

    def __init__(self, fn: TurnFunction):
        if not callable(fn):
            raise ConfigError("FunctionModel needs a function (system_prompt, messages, tools)")
        self.fn = fn
        self.calls = 0

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        answer = self.fn(system_prompt, messages, tools)
        if inspect.isawaitable(answer):
            answer = await answer
        self.calls += 1
        if isinstance(answer, AssistantTurn):
            return answer
        if isinstance(answer, Mapping):
            return _parse_turn(self.calls - 1, answer)
        raise ConfigError(
            f"FunctionModel: the function returned {type(answer).__name__}; it returns an "
            "AssistantTurn or a turn such as {'text': ...}"
        )


class FailingStore:
    """A store that fails when told to: it passes every call to ``store`` except those that
    ``fail`` names.

    ``fail("append", key="charge/c1")`` fails the next append of that key with a
    ``StorageError`` before it reaches the store (nothing is written); with ``after=True`` the
    store writes it first, then the caller gets the error (an outcome the caller cannot know,
    as when a connection drops during a commit). ``times`` (default 1; None: every time) and
    ``run_id`` narrow it further; ``error`` replaces the ``StorageError``. ``failed`` lists the
    calls it failed, as ``(method, run_id, key)``.
    """

    def __init__(self, store: Store):
        self.store = store
        self.failed: list[tuple[str, str | None, str | None]] = []
        self._rules: list[dict[str, Any]] = []

    def fail(
        self,
        method: str,
        *,
        key: str | None = None,
        run_id: str | None = None,
        after: bool = False,
        times: int | None = 1,
        error: BaseException | None = None,
    ) -> None:
        if not callable(getattr(self.store, method, None)):
            raise ConfigError(f"FailingStore: the store has no method {method!r}")
        if times is not None and times < 1:
            raise ConfigError("FailingStore: times is a positive number of calls, or None")
        self._rules.append(
            {
                "method": method,
                "key": key,
                "run_id": run_id,
                "after": after,
                "times": times,
                "error": error,
            }
        )

    def _rule(self, method: str, run_id: str | None, key: str | None) -> dict[str, Any] | None:
        for rule in self._rules:
            if (
                rule["method"] == method
                and rule["key"] in (None, key)
                and rule["run_id"] in (None, run_id)
            ):
                if rule["times"] is not None:
                    rule["times"] -= 1
                    if rule["times"] == 0:
                        self._rules.remove(rule)
                return rule
        return None

    async def _call(
        self, method: str, run_id: str | None, key: str | None, *args: Any, **kw: Any
    ) -> Any:
        rule = self._rule(method, run_id, key)
        if rule is None:
            return await getattr(self.store, method)(*args, **kw)
        error = rule["error"] or StorageError(
            f"FailingStore: {method} of run {run_id!r}"
            + (f" key {key!r}" if key else "")
            + (" failed after it was written" if rule["after"] else " failed; nothing written"),
            run_id=run_id,
        )
        if rule["after"]:
            await getattr(self.store, method)(*args, **kw)
        self.failed.append((method, run_id, key))
        raise error

    # --- the Store protocol, each call through ``_call`` --------------------------------------

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def commits(self) -> int:
        return self.store.commits

    async def close(self) -> None:
        await self.store.close()

    async def create_run(
        self, run_id: str, *, agent: str | None = None, epoch: int | None = None
    ) -> bool:
        return bool(await self._call("create_run", run_id, None, run_id, agent=agent, epoch=epoch))

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
        kw: dict[str, Any] = {"unless": unless, "watch": watch, "index": index, "epoch": epoch}
        kw |= {"before": before, "release": release}
        result: Appended = await self._call("append", run_id, key, run_id, key, kind, payload, **kw)
        return result

    async def update_index(
        self, run_id: str, *, unless: str | None = None, epoch: int | None = None, **fields: Any
    ) -> None:
        await self._call("update_index", run_id, None, run_id, unless=unless, epoch=epoch, **fields)

    async def acquire(
        self, run_id: str, owner: Owner, *, ttl: float, take_over: int | None = None
    ) -> Lease:
        lease: Lease = await self._call(
            "acquire", run_id, None, run_id, owner, ttl=ttl, take_over=take_over
        )
        return lease

    async def renew(self, lease: Lease, *, ttl: float) -> Lease:
        renewed: Lease = await self._call("renew", lease.run_id, None, lease, ttl=ttl)
        return renewed

    async def release(self, lease: Lease) -> bool:
        return bool(await self._call("release", lease.run_id, None, lease))

    async def lease(self, run_id: str) -> Lease | None:
        found: Lease | None = await self._call("lease", run_id, None, run_id)
        return found

    async def claimable(
        self, *, limit: int = 10, host: str | None = None, agent: str | None = None
    ) -> list[tuple[str, Lease | None]]:
        found: list[tuple[str, Lease | None]] = await self._call(
            "claimable", None, None, limit=limit, host=host, agent=agent
        )
        return found

    async def clock_ms(self) -> int:
        return int(await self._call("clock_ms", None, None))

    async def get(self, run_id: str, key: str) -> Record | None:
        found: Record | None = await self._call("get", run_id, key, run_id, key)
        return found

    async def check_run(self, run_id: str) -> bool:
        return bool(await self._call("check_run", run_id, None, run_id))

    async def load(self, run_id: str, *, after: int = 0, prefix: str | None = None) -> list[Record]:
        found: list[Record] = await self._call(
            "load", run_id, None, run_id, after=after, prefix=prefix
        )
        return found

    async def list_runs(
        self,
        *,
        status: str | None = None,
        prefix: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> RunPage:
        page: RunPage = await self._call(
            "list_runs", None, None, status=status, prefix=prefix, limit=limit, before=before
        )
        return page

    async def run_row(self, run_id: str) -> RunRow | None:
        row: RunRow | None = await self._call("run_row", run_id, None, run_id)
        return row


@contextlib.contextmanager
def capture_events(*loggers: str, level: int = logging.DEBUG) -> Iterator[list[dict[str, Any]]]:
    """Collect the log events bide (and its adapters) emit while the block runs, each as a dict
    of its fields with ``event``, ``log_level`` and ``logger``, as structlog's ``capture_logs``
    gives them::

        with capture_events() as events:
            await agent.run("r1", "hello", journal=journal)
        assert [e["event"] for e in events if e["event"] == "run_started"]

    ``loggers`` names the loggers to listen to (default ``runtime`` and ``adapters``);
    ``level``, the least level heard. The loggers' own levels are restored afterwards.
    """
    names = loggers or ("runtime", "adapters")
    events: list[dict[str, Any]] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            fields = record.msg if isinstance(record.msg, dict) else {"event": record.getMessage()}
            events.append({**fields, "log_level": record.levelname.lower(), "logger": record.name})

    handler = _Collect(level)
    saved = []
    for name in names:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > level:
            logger.setLevel(level)
    try:
        yield events
    finally:
        for logger, was in saved:
            logger.removeHandler(handler)
            logger.setLevel(was)
