"""OpenAI Agents SDK agents run durably by bide (``bide[openai-agents]``): function tools,
approvals, handoffs as durable child runs, typed output. Guardrails are refused."""

from adapters.openai_agents.agent import DurableSDKAgent
from adapters.openai_agents.model import AgentsSDKModel
from adapters.openai_agents.tools import AgentsSDKTool, call_context

__all__ = ["AgentsSDKModel", "AgentsSDKTool", "DurableSDKAgent", "call_context"]
