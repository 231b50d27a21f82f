"""``DurableAgent``: an existing ``pydantic_ai.Agent`` driven by bide's journal."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.models import Model as PydanticModel
from pydantic_ai.models import infer_model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from adapters.pydantic_ai.model import PydanticAIModel
from adapters.pydantic_ai.tools import PydanticAITool, ToolPolicy
from runtime.agent import Agent
from runtime.errors import ConfigError
from runtime.result import RunResult, RunStatus
from runtime.retry import RetryPolicy
from runtime.tools import Safety, Tool

__all__ = ["DurableAgent"]


class DurableAgent(Agent[str]):
    """A ``pydantic_ai.Agent`` whose model requests and tool calls bide journals.

    Its model, instructions, model settings and function tools are the Pydantic AI agent's; bide
    drives the run, so a run is started and resumed by id (``run``, ``resume``, ``submit``), a
    ``Worker`` drives it, and ``python -m runtime list/show/resolve/resume`` see it like any
    bide run. ``tools`` gives each tool's ``Safety`` (or a ``ToolPolicy``), by name: a tool not
    named is a ``SIDE_EFFECT``. ``extra_tools`` adds bide tools, such as MCP tools from
    ``adapters.mcp``. ``usage_limits.request_limit`` bounds the model turns of a run.
    """

    def __init__(
        self,
        agent: PydanticAgent[Any, Any],
        *,
        tools: Mapping[str, Safety | ToolPolicy] | None = None,
        deps: Callable[[], Any] | None = None,
        model: PydanticModel | str | None = None,
        usage_limits: UsageLimits | None = None,
        extra_tools: Iterable[Tool] = (),
        name: str | None = None,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
    ):
        if not isinstance(agent, PydanticAgent):
            raise ConfigError(f"DurableAgent wraps a pydantic_ai.Agent, got {agent!r}")
        if deps is not None and not callable(deps):
            raise ConfigError("deps must be a function returning the run's dependencies")
        chosen = model if model is not None else agent.model
        if chosen is None:
            raise ConfigError("the Pydantic AI agent has no model: pass model=")
        self.pydantic_agent = agent
        self.output_type: Any = _output_type(agent)
        self.pydantic_model: PydanticModel = infer_model(chosen)
        policies = _policies(tools or {})
        wrapped = list(
            _function_tools(agent, policies, self.pydantic_model, deps or (lambda: None))
        )
        unknown = sorted(set(policies) - {t.spec.name for t in wrapped})
        if unknown:
            raise ConfigError(f"tools names tools the Pydantic AI agent does not have: {unknown}")
        limit = usage_limits.request_limit if usage_limits is not None else None
        super().__init__(
            model=PydanticAIModel(
                self.pydantic_model,
                settings=_settings(agent),
                definitions={t.spec.name: t.definition for t in wrapped},
                output_tools=_output_tools(agent) if self.output_type is not str else (),
            ),
            tools=[*wrapped, *extra_tools],
            system_prompt=_instructions(agent),
            max_turns=limit if limit is not None else 20,
            name=name or agent.name or "agent",
            max_concurrency=max_concurrency,
            tool_retry=tool_retry,
            model_retry=model_retry,
        )

    def typed_output(self, result: RunResult[Any]) -> Any:
        """The completed run's output as the Pydantic AI agent's ``output_type``: the final text
        for ``str``, else that text parsed as JSON and validated. A run that has not completed
        raises ``ConfigError`` (look at ``result.status``, ``halts`` and ``waiting``)."""
        if result.status is not RunStatus.COMPLETED:
            raise ConfigError(
                f"run {result.run_id!r} is {result.status.value}, not completed",
                run_id=result.run_id,
            )
        output_type = self.output_type
        text = result.output or ""
        if output_type is str:
            return text
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        try:
            return adapter.validate_json(text)
        except ValidationError as exc:
            # Pydantic AI's output tool wraps a type that is not an object in {"response": ...}.
            try:
                wrapped = TypeAdapter(dict[str, Any]).validate_json(text)
            except ValidationError:
                wrapped = {}
            if set(wrapped) == {"response"}:
                try:
                    return adapter.validate_python(wrapped["response"])
                except ValidationError:
                    pass
            raise UnexpectedModelBehavior(
                f"run {result.run_id!r}: the final answer is not a {output_type!r}: {exc}"
            ) from exc


def _output_type(agent: PydanticAgent[Any, Any]) -> Any:
    """The agent's output type, if bide can give it: ``str`` or one type the final text is
    validated as (JSON). Output functions, tool/native/prompted output markers and unions of
    several outputs are refused: bide journals a final text, not an output tool's call."""
    given: Any = agent.output_type
    if given is str:
        return str
    if isinstance(given, type):
        return given
    raise ConfigError(
        f"output_type {given!r}: bide gives str or one type validated from the final text "
        "(JSON); output functions, ToolOutput/NativeOutput/PromptedOutput and lists of outputs "
        "are not supported"
    )


def _output_tools(agent: PydanticAgent[Any, Any]) -> list[ToolDefinition]:
    """Pydantic AI's output tools for the agent's ``output_type`` (``final_result``), as it
    would offer them to the model; none if it has none."""
    toolset = getattr(agent._output_schema, "toolset", None)
    definitions = getattr(toolset, "_tool_defs", None) or []
    return [d for d in definitions if isinstance(d, ToolDefinition)]


def _settings(agent: PydanticAgent[Any, Any]) -> ModelSettings | None:
    """The agent's model settings, which must be fixed ones (a function of the run would be
    evaluated anew by every drive)."""
    given: Any = agent.model_settings
    if given is None or isinstance(given, dict):
        return cast("ModelSettings | None", given)
    raise ConfigError("the Pydantic AI agent's model_settings must be a dict, not computed")


def _policies(tools: Mapping[str, Safety | ToolPolicy]) -> dict[str, ToolPolicy]:
    out: dict[str, ToolPolicy] = {}
    for name, given in tools.items():
        if isinstance(given, Safety):
            out[name] = ToolPolicy(given)
        elif isinstance(given, ToolPolicy):
            out[name] = given
        else:
            raise ConfigError(f"tool {name}: give a runtime.Safety or a ToolPolicy, not {given!r}")
    return out


def _function_tools(
    agent: PydanticAgent[Any, Any],
    policies: Mapping[str, ToolPolicy],
    model: PydanticModel,
    deps: Callable[[], Any],
) -> Iterable[PydanticAITool]:
    for toolset in agent.toolsets:
        if not isinstance(toolset, FunctionToolset):
            raise ConfigError(
                f"{type(toolset).__name__}: only function toolsets run through bide; give MCP "
                "servers as adapters.mcp tools (extra_tools=), under bide's MCP rules"
            )
        for name, tool in toolset.tools.items():
            yield PydanticAITool(
                toolset,
                tool.tool_def,
                policies.get(name, ToolPolicy()),
                model=model,
                deps=deps,
            )


def _instructions(agent: PydanticAgent[Any, Any]) -> str | None:
    """The agent's instructions and system prompts, which must be plain strings: a function of
    the run would be evaluated anew by every drive, and a resumed run must see what it saw."""
    texts: list[str] = list(agent._system_prompts)
    for sourced in agent._instructions:
        if not isinstance(sourced.instruction, str):
            raise ConfigError(
                "the Pydantic AI agent has instructions computed by a function; bide needs them "
                "as strings (a resumed run must see what the first drive saw)"
            )
        texts.append(sourced.instruction)
    if agent._system_prompt_functions:
        raise ConfigError("the Pydantic AI agent has system prompt functions; give strings")
    return "\n\n".join(texts) if texts else None
