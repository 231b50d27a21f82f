"""Pydantic AI agents run durably by bide (``bide[pydantic-ai]``). See ``docs/pydantic-ai.md``."""

from adapters.pydantic_ai.agent import DurableAgent
from adapters.pydantic_ai.model import PydanticAIModel
from adapters.pydantic_ai.tools import PydanticAITool, ToolPolicy, call_context

__all__ = [
    "DurableAgent",
    "PydanticAIModel",
    "PydanticAITool",
    "ToolPolicy",
    "call_context",
]
