"""OpenAI Agents SDK agents run durably by bide (``bide[openai-agents]``); a first part: function
tools, approvals, str output. Handoffs, structured output and guardrails are refused."""

from adapters.openai_agents.agent import DurableSDKAgent
from adapters.openai_agents.model import AgentsSDKModel
from adapters.openai_agents.tools import AgentsSDKTool, call_context

__all__ = ["AgentsSDKModel", "AgentsSDKTool", "DurableSDKAgent", "call_context"]
