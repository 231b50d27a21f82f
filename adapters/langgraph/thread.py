"""A LangGraph thread as a bide run that a ``Worker`` or ``python -m runtime resume`` drives:
the run ``langgraph:<thread>`` holds the graph's input, and driving it invokes the graph on
that thread; its guarded tool calls are its child runs ``langgraph:<thread>/<call id>``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.langgraph.guard import ToolGuard, ToolHalted, thread_run_id
from runtime import Agent, AssistantTurn, Message, ToolCall
from runtime.errors import ConfigError, ModelError, ProtocolError, ToolError, ToolOutcomeUnknown
from runtime.messages import ToolResultMessage, UserMessage
from runtime.reconcile import Absent, Attempt, Unknown
from runtime.result import RunResult
from runtime.tools import Safety, ToolContext, ToolSpec

__all__ = ["GraphAgent"]

GRAPH = "graph"
"""The one call of a thread's run, and the name of its tool: an invocation of the graph."""


def _messages(text: str) -> Any:
    return {"messages": [HumanMessage(text)]}


def _last_message(output: Any) -> str:
    messages = output.get("messages") if isinstance(output, dict) else None
    if isinstance(messages, list) and messages and isinstance(messages[-1], BaseMessage):
        content = messages[-1].content
        return content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return json.dumps(output, sort_keys=True, default=str)


class GraphAgent(Agent[str]):
    """The bide agent of LangGraph threads: its run ``langgraph:<thread>`` (``thread_run_id``)
    invokes ``graph`` (a compiled graph with a checkpointer, or a function that builds one,
    called for each invocation) on the thread ``<thread>``.

    The first drive invokes the graph with ``inputs(run input)`` (default: the input as the
    user's message of a ``MessagesState``); a later drive, after a crash or once a halted call
    is resolved, continues the thread from LangGraph's checkpoint (``invoke(None, config)``).
    The run's output is ``answer(final state)`` (default: the last message's content). A guarded
    tool call (through ``guard``) that halts halts the thread's run; once that call's run is
    resolved, a ``Worker`` (its reconciler, ``runtime.reconcile``) or ``resume`` continues the
    thread. What the graph runs again (unguarded nodes) is LangGraph's doing.
    """

    def __init__(
        self,
        graph: Any,
        *,
        guard: ToolGuard,
        name: str = "langgraph",
        inputs: Callable[[str], Any] = _messages,
        answer: Callable[[Any], str] = _last_message,
    ):
        if not isinstance(guard, ToolGuard):
            raise ConfigError(f"guard must be the ToolGuard of the graph's tools, not {guard!r}")
        if not callable(getattr(graph, "invoke", None)) and not callable(graph):
            raise ConfigError(
                f"graph must be a compiled LangGraph graph or a function building one: {graph!r}"
            )
        self.graph = graph
        self.guard = guard
        self.inputs = inputs
        self.answer = answer
        super().__init__(
            model=_ThreadModel(),
            tools=[_GraphTool(self)],
            name=name,
            max_turns=2,
            max_concurrency=1,
            output_tools=[GRAPH],
        )

    async def run(self, run_id: str, *args: Any, **kwargs: Any) -> RunResult[str]:
        """``Agent.run``, for a run id that names a thread (``thread_run_id``)."""
        _thread_of(run_id)
        return await super().run(run_id, *args, **kwargs)

    async def submit(self, run_id: str, *args: Any, **kwargs: Any) -> RunResult[str]:
        """``Agent.submit``, for a run id that names a thread: a ``Worker`` drives it."""
        _thread_of(run_id)
        return await super().submit(run_id, *args, **kwargs)

    def compiled(self) -> Any:
        """The graph to invoke now."""
        graph = self.graph if callable(getattr(self.graph, "invoke", None)) else self.graph()
        if getattr(graph, "checkpointer", None) is None:
            raise ConfigError(
                "the thread's graph has no checkpointer: compile it with one, so that a drive "
                "after the first continues the thread"
            )
        return graph

    def invoke(self, thread: str, text: str) -> str:
        """Run the thread to its end: from its start if it has no checkpoint, else from the
        checkpoint (its answer at once if it ended already). Blocking: called in a thread."""
        graph = self.compiled()
        config: Any = {"configurable": {"thread_id": thread}}
        snapshot = graph.get_state(config)
        if snapshot.created_at is None:  # no checkpoint: the thread starts
            graph.invoke(self.inputs(text), config)
        elif snapshot.next:
            graph.invoke(None, config)
        snapshot = graph.get_state(config)
        if snapshot.next:
            raise ToolError(
                f"thread {thread} stopped before its end, at {list(snapshot.next)} (an "
                "interrupt()?): a thread's run drives a graph to its end"
            )
        return self.answer(snapshot.values)


def _thread_of(run_id: str) -> str:
    prefix = thread_run_id("")
    if not isinstance(run_id, str) or not run_id.startswith(prefix) or run_id == prefix:
        raise ConfigError(
            f"a LangGraph thread's run id is {prefix}<thread> (thread_run_id), not {run_id!r}",
            run_id=run_id if isinstance(run_id, str) else None,
        )
    return run_id[len(prefix) :]


class _ThreadModel:
    """The model of a thread's run: its first turn invokes the graph with the run's input; a
    second turn comes only after the graph failed, and ends the run failed."""

    async def complete(
        self, system_prompt: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantTurn:
        first = messages[0]
        if not isinstance(first, UserMessage):
            raise ProtocolError("a thread's run starts with its input")
        failed = [m for m in messages if isinstance(m, ToolResultMessage)]
        if failed:
            raise ModelError(f"the graph failed: {failed[-1].content}")
        call = ToolCall(GRAPH, GRAPH, {"input": first.text})
        return AssistantTurn(tool_calls=(call,), finish_reason="tool_calls")


class _GraphTool:
    """An invocation of the thread's graph. A SIDE_EFFECT, so that a guarded call halting in
    it halts the run; its reconciler lets the graph continue once no guarded call of the
    thread is halted (invoking it again runs no guarded call twice)."""

    def __init__(self, agent: GraphAgent):
        self.agent = agent
        self.spec = ToolSpec(
            name=GRAPH,
            description="invoke the LangGraph graph on the run's thread",
            input_schema={
                "type": "object",
                "properties": {"input": {"type": "string"}},
                "required": ["input"],
            },
            safety=Safety.SIDE_EFFECT,
            reconcile=self.continues,
            settle=0,
        )

    async def call(self, arguments: Any, context: ToolContext | None = None) -> Any:
        if context is None:
            raise ConfigError("the graph of a LangGraph thread runs only as its bide run")
        try:
            thread = _thread_of(context.run_id)
        except ConfigError as exc:  # a run of this agent started under another id: it fails
            raise ToolError(str(exc)) from exc
        try:
            return await asyncio.to_thread(self.agent.invoke, thread, str(arguments["input"]))
        except ToolHalted as exc:
            halt = exc.halt
            raise ToolOutcomeUnknown(
                f"its guarded call {halt.call_id} ({halt.tool}) halted: {halt.cause}; resolve "
                f"it (python -m runtime resolve {exc.run_id} {halt.call_id} ...), then resume "
                "this run, or let a worker"
            ) from exc
        except ToolError:
            raise
        except Exception as exc:  # the graph's own failure: the run fails, it does not halt
            raise ToolError(f"the graph raised {type(exc).__name__}: {exc}") from exc

    async def continues(self, attempt: Attempt) -> Absent | Unknown:
        """The thread may go on unless one of its guarded calls is halted (a person resolves
        it, in its own run)."""
        halted = await self.agent.guard.halted_calls(_thread_of(attempt.run_id))
        if halted:
            return Unknown(f"its guarded call's run {halted[0]} is halted: resolve it there")
        return Absent(
            "no guarded call of the thread is halted: the graph continues from its checkpoint"
        )
