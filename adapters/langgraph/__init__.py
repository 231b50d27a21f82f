"""LangGraph tool calls made at most once by bide (``bide[langgraph]``): a guard for tool nodes
and ``@task`` functions. See ``docs/langgraph.md``."""

from adapters.langgraph.calls import call_context
from adapters.langgraph.guard import ToolGuard, ToolHalted, guard_run_id

__all__ = ["ToolGuard", "ToolHalted", "call_context", "guard_run_id"]
