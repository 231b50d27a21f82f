"""``DurableSDKAgent``: an existing OpenAI Agents SDK ``Agent`` driven by bide's journal; its
handoffs become durable child runs (``adapters.openai_agents.handoffs``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agents import Agent as SDKAgent
from agents.agent_output import AgentOutputSchemaBase
from agents.models.interface import Model as SDKModel
from agents.models.multi_provider import MultiProvider
from agents.tool import FunctionTool

from adapters._calls import safeties
from adapters.openai_agents.handoffs import HandoffTool, target_of
from adapters.openai_agents.model import AgentsSDKModel
from adapters.openai_agents.tools import AgentsSDKTool
from runtime.agent import Agent
from runtime.errors import ConfigError
from runtime.retry import RetryPolicy
from runtime.tools import Safety, Tool

__all__ = ["DurableSDKAgent"]


class DurableSDKAgent(Agent[Any]):
    """An Agents SDK ``Agent`` whose model responses and function tool calls bide journals.

    Its model, instructions, model settings and function tools are the SDK agent's; bide drives
    the run (``run``, ``resume``, ``submit``, a ``Worker``, the CLI). ``tools`` gives each
    tool's ``Safety`` by name (for the agents it hands off to too); a tool not named is a
    ``SIDE_EFFECT``. A tool's ``needs_approval=True`` is bide's 1-of-1 gate.

    Each handoff is a tool whose call drives a durable child run of the target agent, given the
    conversation so far; the target's output is the run's (``handoffs``). An ``output_type``
    is bide's typed output: the model is asked for that schema, bide validates the answer, and
    ``RunResult.output`` is the value. Every agent of a handoff tree must have the same
    ``output_type``. Hosted tools, guardrails, the SDK's MCP servers and handoff callbacks or
    input filters are refused when it is built.
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
        _handed: tuple[SDKAgent[Any], ...] = (),
    ):
        if not isinstance(agent, SDKAgent):
            raise ConfigError(f"DurableSDKAgent wraps an agents.Agent, got {agent!r}")
        _refuse_unsupported(agent)
        policies = safeties(tools)
        chain = (*_handed, agent)
        handoffs: list[HandoffTool] = []
        for entry in agent.handoffs:
            target, tool_name, description = target_of(entry)
            if any(target is seen for seen in chain):
                names = " -> ".join(a.name for a in (*chain, target))
                raise ConfigError(f"a handoff cycle ({names}) is not supported through bide")
            if target.output_type != agent.output_type:
                raise ConfigError(
                    f"agent {agent.name!r} hands off to {target.name!r}, whose output_type "
                    "differs: the target's output is the run's, so they must be the same"
                )
            durable_target = DurableSDKAgent(
                target,
                tools=policies,
                deps=deps,
                max_turns=max_turns,
                max_concurrency=max_concurrency,
                tool_retry=tool_retry,
                model_retry=model_retry,
                _handed=chain,
            )
            handoffs.append(HandoffTool(durable_target, name=tool_name, description=description))
        function_tools: dict[str, FunctionTool] = {}
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                raise ConfigError(
                    f"{type(tool).__name__}: only function tools run through bide; give MCP "
                    "servers as adapters.mcp tools (extra_tools=)"
                )
            function_tools[tool.name] = tool
        if not _handed:
            unknown = sorted(set(policies) - _tool_names(agent))
            if unknown:
                raise ConfigError(f"tools names tools the SDK agents do not have: {unknown}")
        self.sdk_agent = agent
        self.sdk_model = _model(agent.model)
        wrapped = [
            AgentsSDKTool(t, policies.get(name, Safety.SIDE_EFFECT), deps=deps or (lambda: None))
            for name, t in function_tools.items()
        ]
        self.handoffs = tuple(handoffs)
        super().__init__(
            model=AgentsSDKModel(
                self.sdk_model,
                settings=agent.model_settings,
                tools=function_tools,
                handed=bool(_handed),
            ),
            tools=[*wrapped, *handoffs, *extra_tools],
            system_prompt=agent.instructions if isinstance(agent.instructions, str) else None,
            max_turns=max_turns,
            name=agent.name,
            max_concurrency=max_concurrency,
            tool_retry=tool_retry,
            model_retry=model_retry,
            output_type=agent.output_type,
            output_tools=[h.spec.name for h in handoffs],
        )


def _refuse_unsupported(agent: SDKAgent[Any]) -> None:
    if agent.instructions is not None and not isinstance(agent.instructions, str):
        raise ConfigError("instructions computed by a function are not supported; give a string")
    if isinstance(agent.output_type, AgentOutputSchemaBase):
        raise ConfigError(
            "an output_type given as an AgentOutputSchema is not supported through bide; give "
            "the type"
        )
    if agent.input_guardrails or agent.output_guardrails:
        raise ConfigError("guardrails are not run through bide; remove them or run them yourself")
    if agent.mcp_servers:
        raise ConfigError("give MCP servers as adapters.mcp tools (extra_tools=)")


def _tool_names(agent: SDKAgent[Any], seen: tuple[SDKAgent[Any], ...] = ()) -> set[str]:
    """The names of the tools of ``agent`` and of the agents it hands off to."""
    names = {t.name for t in agent.tools}
    for entry in agent.handoffs:
        target = target_of(entry)[0]
        if not any(target is s for s in (*seen, agent)):
            names |= _tool_names(target, (*seen, agent))
    return names


def _model(model: str | SDKModel | None) -> SDKModel:
    if isinstance(model, SDKModel):
        return model
    if isinstance(model, str):
        return MultiProvider().get_model(model)
    raise ConfigError("the SDK agent has no model: give agents.Agent(model=...)")
