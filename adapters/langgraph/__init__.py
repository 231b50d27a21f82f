"""LangGraph tool calls made at most once by bide (``bide[langgraph]``): a guard for tool nodes
and ``@task`` functions, and a thread as a bide run a Worker drives. See ``docs/langgraph.md``."""

from adapters.langgraph.calls import call_context
from adapters.langgraph.guard import ToolGuard, ToolHalted, guard_run_id, thread_run_id
from adapters.langgraph.thread import GraphAgent

__all__ = ["GraphAgent", "ToolGuard", "ToolHalted", "call_context", "guard_run_id", "thread_run_id"]
