"""``DurableSDKAgent``: an existing OpenAI Agents SDK ``Agent`` driven by bide's journal."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agents import Agent as SDKAgent
from agents.models.interface import Model as SDKModel
from agents.models.multi_provider import MultiProvider
from agents.tool import FunctionTool

from adapters.openai_agents.model import AgentsSDKModel
from adapters.openai_agents.tools import AgentsSDKTool
from runtime.agent import Agent
from runtime.errors import ConfigError
from runtime.retry import RetryPolicy
from runtime.tools import Safety, Tool

__all__ = ["DurableSDKAgent"]


class DurableSDKAgent(Agent[str]):
    """An Agents SDK ``Agent`` whose model responses and function tool calls bide journals.

    Its model, instructions, model settings and function tools are the SDK agent's; bide drives
    the run (``run``, ``resume``, ``submit``, a ``Worker``, the CLI). ``tools`` gives each
    tool's ``Safety`` by name; a tool not named is a ``SIDE_EFFECT``. A tool's
    ``needs_approval=True`` is bide's 1-of-1 gate. Handoffs, hosted tools, guardrails and
    structured output are refused when it is built (not supported yet).
    """

    def __init__(
        self,
        agent: SDKAgent[Any],
        *,
        tools: Mapping[str, Safety] | None = None,
        deps: Callable[[], Any] | None = None,
        extra_tools: Iterable[Tool] = (),
        max_turns: int = 20,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
    ):
        if not isinstance(agent, SDKAgent):
            raise ConfigError(f"DurableSDKAgent wraps an agents.Agent, got {agent!r}")
        _refuse_unsupported(agent)
        policies = dict(tools or {})
        for name, safety in policies.items():
            if not isinstance(safety, Safety):
                raise ConfigError(f"tool {name}: give a runtime.Safety, not {safety!r}")
        function_tools: dict[str, FunctionTool] = {}
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                raise ConfigError(
                    f"{type(tool).__name__}: only function tools run through bide; give MCP "
                    "servers as adapters.mcp tools (extra_tools=)"
                )
            function_tools[tool.name] = tool
        unknown = sorted(set(policies) - set(function_tools))
        if unknown:
            raise ConfigError(f"tools names tools the SDK agent does not have: {unknown}")
        self.sdk_agent = agent
        self.sdk_model = _model(agent.model)
        wrapped = [
            AgentsSDKTool(t, policies.get(name, Safety.SIDE_EFFECT), deps=deps or (lambda: None))
            for name, t in function_tools.items()
        ]
        super().__init__(
            model=AgentsSDKModel(
                self.sdk_model, settings=agent.model_settings, tools=function_tools
            ),
            tools=[*wrapped, *extra_tools],
            system_prompt=agent.instructions if isinstance(agent.instructions, str) else None,
            max_turns=max_turns,
            name=agent.name,
            max_concurrency=max_concurrency,
            tool_retry=tool_retry,
            model_retry=model_retry,
        )


def _refuse_unsupported(agent: SDKAgent[Any]) -> None:
    if agent.instructions is not None and not isinstance(agent.instructions, str):
        raise ConfigError("instructions computed by a function are not supported; give a string")
    if agent.handoffs:
        raise ConfigError("handoffs are not supported through bide yet")
    if agent.output_type not in (None, str):
        raise ConfigError("a structured output_type is not supported through bide yet")
    if agent.input_guardrails or agent.output_guardrails:
        raise ConfigError("guardrails are not run through bide; remove them or run them yourself")
    if agent.mcp_servers:
        raise ConfigError("give MCP servers as adapters.mcp tools (extra_tools=)")


def _model(model: str | SDKModel | None) -> SDKModel:
    if isinstance(model, SDKModel):
        return model
    if isinstance(model, str):
        return MultiProvider().get_model(model)
    raise ConfigError("the SDK agent has no model: give agents.Agent(model=...)")
