"""``ToolGuard``: LangGraph tool calls journaled by bide, each at most once across LangGraph's
replays. A guarded call is keyed by the graph's ``thread_id`` and the call's id; its run is
``guard_run_id(thread_id, call_id)`` in bide's journal, where ``python -m runtime
list/show/resolve`` see it like any run."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import ToolCall as LCToolCall
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from adapters._calls import safeties
from adapters.langgraph.calls import Runner, call_agent, call_input
from runtime import Agent, Halt, Journal, RunStatus
from runtime.children import child_run_id, run_as_child
from runtime.errors import BideError, ConfigError, ProtocolError, ToolError
from runtime.logs import get_logger
from runtime.tools import Safety, ToolContext, validate_tool_name

__all__ = ["ToolGuard", "ToolHalted", "guard_run_id", "thread_run_id"]

log = get_logger(__name__)

T = TypeVar("T")

WAIT = 10.0
"""Seconds a guarded call waits for its run's lease held by another live process."""


class ToolHalted(BideError):
    """A guarded side effect's outcome is unknown: it may have acted, its result was not
    recorded. The call halts, now and on every replay, until it is resolved in bide
    (``python -m runtime resolve RUN CALL ...`` or ``journal.resolve``); then invoke the graph
    again. ``halt`` says which call and why."""

    def __init__(self, run_id: str, halt: Halt):
        super().__init__(
            f"tool call {halt.call_id} ({halt.tool}) halted: {halt.cause}; resolve it with "
            f"python -m runtime resolve {run_id} {halt.call_id} ..., then invoke the graph again",
            run_id=run_id,
            call_id=halt.call_id,
        )
        self.halt = halt


def thread_run_id(thread_id: str) -> str:
    """The bide run of the LangGraph thread ``thread_id`` (``GraphAgent``); its guarded calls'
    runs are its children."""
    return f"langgraph:{thread_id}"


def guard_run_id(thread_id: str, call_id: str) -> str:
    """The bide run of the call ``call_id`` of the LangGraph thread ``thread_id``."""
    return child_run_id(thread_run_id(thread_id), call_id)


class ToolGuard:
    """Runs LangGraph tool calls through bide's journal (``db``: a SQLite path or a PostgreSQL
    URL). ``tools`` gives each tool's ``Safety`` by name; a tool not named is a SIDE_EFFECT.

    - ``ToolNode(tools, wrap_tool_call=guard.wrap_tool_call,
      awrap_tool_call=guard.awrap_tool_call)`` guards a tool node;
    - ``guard.invoke(tool, tool_call)`` (or ``ainvoke``) runs one call, e.g. in a ``@task``.

    A call whose run has its result returns it without running the tool; a SIDE_EFFECT whose
    outcome is unknown raises ``ToolHalted``. The guard's journal lives on a thread of its own
    (its event loop); ``close()`` it, or use it as a context manager.
    """

    def __init__(self, db: str | Path, *, tools: Mapping[str, Safety] | None = None):
        self.safety = safeties(tools)
        self.db = db
        self._agents: dict[tuple[str, Safety], Agent[Any]] = {}
        self._runners: dict[str, Runner] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve, name="bide-langgraph-guard", daemon=True
        )
        self._thread.start()
        self._journal: Journal | None = None
        self._opened = self._submit(self._open())
        self._closed = False

    def _serve(self) -> None:
        """The guard's thread: its event loop, until ``close()`` stops it.

        A ``SystemExit`` or ``KeyboardInterrupt`` raised in a guarded call (a tool that calls
        ``sys.exit()``) ends its task and then ``run_forever`` itself. The loop is run again:
        the call's caller gets that exception from the task, in its own thread, as it would
        without the guard, and later calls are served. Left stopped, the thread would end
        without a word and every caller would wait for it forever."""
        while True:
            try:
                self._loop.run_forever()
                return
            except BaseException as exc:
                log.warning("langgraph_guard_call_raised", error=f"{type(exc).__name__}({exc})")

    async def _open(self) -> Journal:
        journal = Journal(self.db)
        await journal.__aenter__()
        self._journal = journal
        return journal

    def _submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the journal and stop the guard's thread."""
        if self._closed:
            return
        self._closed = True
        try:
            journal = self._opened.result()
            self._submit(journal.close()).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> ToolGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- ToolNode ---------------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]
    ) -> ToolMessage:
        """``ToolNode(wrap_tool_call=...)``: the call runs through bide, at most once."""
        call = request.tool_call
        thread = _thread_id(request.runtime.config)

        async def run(context: ToolContext) -> Any:
            return await _settled(asyncio.to_thread(execute, request))

        return self._result(call, self._submit(self._guarded(thread, call, run)).result())

    async def awrap_tool_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> ToolMessage:
        """``ToolNode(awrap_tool_call=...)``: as ``wrap_tool_call``, for async graphs."""
        call = request.tool_call
        thread = _thread_id(request.runtime.config)
        graph_loop = asyncio.get_running_loop()

        async def run(context: ToolContext) -> Any:
            done = asyncio.run_coroutine_threadsafe(_awaited(execute(request)), graph_loop)
            return await _settled(asyncio.wrap_future(done))

        outcome = await asyncio.wrap_future(self._submit(self._guarded(thread, call, run)))
        return self._result(call, outcome)

    # --- one call (a @task) -------------------------------------------------------------------

    def invoke(
        self, tool: BaseTool, tool_call: LCToolCall, config: RunnableConfig | None = None
    ) -> ToolMessage:
        """Run ``tool`` for ``tool_call`` through bide, e.g. inside a ``@task``: the thread is
        the one of ``config`` or, inside a graph, of the graph's config."""
        thread = _thread_id(config if config is not None else get_config())

        async def run(context: ToolContext) -> Any:
            return await _settled(asyncio.to_thread(_invoke, tool, tool_call))

        return self._result(tool_call, self._submit(self._guarded(thread, tool_call, run)).result())

    async def ainvoke(
        self, tool: BaseTool, tool_call: LCToolCall, config: RunnableConfig | None = None
    ) -> ToolMessage:
        """As ``invoke``, for async code."""
        thread = _thread_id(config if config is not None else get_config())
        graph_loop = asyncio.get_running_loop()

        async def run(context: ToolContext) -> Any:
            done = asyncio.run_coroutine_threadsafe(_ainvoke(tool, tool_call), graph_loop)
            return await _settled(asyncio.wrap_future(done))

        outcome = await asyncio.wrap_future(self._submit(self._guarded(thread, tool_call, run)))
        return self._result(tool_call, outcome)

    # --- the journal side ---------------------------------------------------------------------

    async def _guarded(self, thread: str, call: LCToolCall, run: Runner) -> tuple[str, Any]:
        """Drive the call's run; ``("value", data)`` or ``("error", message)``."""
        journal = await asyncio.wrap_future(self._opened)
        name, call_id = call["name"], call.get("id")
        if not call_id:
            raise ConfigError(f"tool call {name} has no id: the guard keys calls by their id")
        run_id = guard_run_id(thread, call_id)
        agent = self._agent(name)
        # Two drives of one call in this process (two invocations of a thread at once) run
        # the same call: either's runner serves, and the lease lets one of them drive.
        self._runners[run_id] = run
        try:
            # Its start names the thread's run as its parent: `show` and `resolve` point there.
            result = await run_as_child(
                agent,
                run_id,
                call_input(call_id, name, call["args"]),
                journal=journal,
                parent=thread_run_id(thread),
                call_id=call_id,
                wait=WAIT,
            )
        finally:
            if self._runners.get(run_id) is run:
                del self._runners[run_id]
        if result.status is RunStatus.HALTED:
            raise ToolHalted(run_id, result.halts[0])
        if result.status is not RunStatus.COMPLETED:
            raise ProtocolError(
                f"guarded call {call_id} ended {result.status.value}: {result.error}",
                run_id=run_id,
                call_id=call_id,
            )
        state = await journal.require(run_id)
        record = state.calls[call_id].result
        if record is None:
            raise ProtocolError(f"guarded call {call_id} has no result", run_id=run_id)
        payload = record.payload
        if payload.get("outcome") == "value":
            return "value", payload.get("value")
        error = payload.get("error")
        return "error", error.get("message") if isinstance(error, dict) else str(error)

    async def halted_calls(self, thread_id: str) -> list[str]:
        """The runs of the thread's guarded calls that are halted now."""
        return await asyncio.wrap_future(self._submit(self._halted(thread_id)))

    async def _halted(self, thread_id: str) -> list[str]:
        journal = await asyncio.wrap_future(self._opened)
        prefix, cursor, halted = thread_run_id(thread_id) + "/", None, []
        while True:
            page = await journal.list_runs(status="halted", prefix=prefix, before=cursor)
            halted += [row.run_id for row in page.runs]
            cursor = page.next_cursor
            if cursor is None:
                return halted

    def _agent(self, name: str) -> Agent[Any]:
        safety = self.safety.get(name, Safety.SIDE_EFFECT)
        agent = self._agents.get((name, safety))
        if agent is None:
            validate_tool_name(name)
            agent = self._agents[(name, safety)] = call_agent(name, safety, self._runners)
        return agent

    def _result(self, call: LCToolCall, outcome: tuple[str, Any]) -> ToolMessage:
        kind, data = outcome
        if kind == "error":
            raise ToolException(data)
        content, status = data, "success"
        if isinstance(data, dict) and "content" in data and set(data) <= {"content", "status"}:
            content, status = data["content"], data.get("status", "success")
        elif not isinstance(data, str):  # a value a person resolved the call with
            content = json.dumps(data, sort_keys=True)
        return ToolMessage(
            content=content, name=call["name"], tool_call_id=call.get("id") or "", status=status
        )


def _thread_id(config: Mapping[str, Any] | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is None:
        raise ConfigError(
            "bide's LangGraph guard keys calls by thread: invoke the graph with "
            '{"configurable": {"thread_id": ...}}'
        )
    return str(thread)


async def _awaited(result: Awaitable[T]) -> T:
    return await result


def _invoke(tool: BaseTool, tool_call: LCToolCall) -> Any:
    return tool.invoke({**tool_call, "type": "tool_call"})


async def _ainvoke(tool: BaseTool, tool_call: LCToolCall) -> Any:
    return await tool.ainvoke({**tool_call, "type": "tool_call"})


async def _settled(work: Awaitable[Any]) -> Any:
    """The tool's output as bide records it; a ``ToolException`` (the tool reported a
    failure) as bide's ``ToolError``, recorded as an error the model sees."""
    try:
        output = await work
    except ToolException as exc:
        raise ToolError(str(exc)) from exc
    return _recorded(output)


def _recorded(output: Any) -> Any:
    """What bide records of a tool's output: a tool message's content and status. A tool that
    reported failure (``ToolException``) is a failure the model sees; a ``Command`` is not
    journaled (the call ran: a SIDE_EFFECT halts)."""
    if isinstance(output, ToolMessage):
        return {"content": output.content, "status": output.status}
    if isinstance(output, Command):
        raise ProtocolError("the tool returned a Command, which bide's guard does not journal")
    return {"content": output if isinstance(output, str) else str(output), "status": "success"}
