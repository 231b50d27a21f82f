"""A Pydantic AI tool as a bide Tool: bide decides whether it may run (its Safety, the journal),
Pydantic AI validates its arguments and calls the user's function through its toolset."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import ValidationError
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.models import Model as PydanticModel
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from adapters._calls import CallSlot
from runtime.approval import single_approval
from runtime.errors import ConfigError, ToolArgumentsError, ToolError, UnknownToolError
from runtime.tools import Safety, ToolContext, ToolSpec

__all__ = ["PydanticAITool", "ToolPolicy", "call_context"]

_SLOT = CallSlot("bide_pydantic_ai_call", inside="a tool a DurableAgent runs")


def call_context() -> ToolContext:
    """bide's context of the tool call running now: its ``idempotency_key`` (the same on every
    attempt and resume: give it to your provider), ``run_id`` and ``call_id``.

    Call it inside a Pydantic AI tool that a ``DurableAgent`` runs; anywhere else it raises
    ``ConfigError``.
    """
    return _SLOT.current()


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How bide runs one Pydantic AI tool. ``safety`` defaults to ``SIDE_EFFECT`` (at most once,
    halting on an unknown outcome); ``reconcile``, ``settle`` and ``timeout`` are those of
    ``runtime.ToolSpec``."""

    safety: Safety = Safety.SIDE_EFFECT
    reconcile: Any = None
    settle: float | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.safety, Safety):
            raise ConfigError(f"ToolPolicy.safety must be a runtime.Safety, not {self.safety!r}")


class PydanticAITool:
    """One tool of a Pydantic AI toolset, run by bide's rules."""

    def __init__(
        self,
        toolset: AbstractToolset[Any],
        definition: ToolDefinition,
        policy: ToolPolicy,
        *,
        model: PydanticModel,
        deps: Callable[[], Any],
    ):
        if definition.kind not in ("function", "unapproved"):
            raise ConfigError(
                f"tool {definition.name}: Pydantic AI {definition.kind!r} tools are not run "
                "through bide (deferred to the caller, they have no call bide could journal)"
            )
        self.toolset = toolset
        self.definition = definition
        self.model = model
        self.deps = deps
        # A Pydantic AI approval (requires_approval=True) is bide's 1-of-1 gate: the call pauses
        # before it runs until `approve` or `deny`, which the journal keeps.
        self.spec = ToolSpec(
            name=definition.name,
            description=definition.description or "",
            input_schema=dict(definition.parameters_json_schema),
            safety=policy.safety,
            approval=single_approval() if definition.kind == "unapproved" else None,
            timeout=policy.timeout,
            reconcile=policy.reconcile,
            settle=policy.settle,
        )

    def __repr__(self) -> str:
        return f"<PydanticAITool {self.spec.name} {self.spec.safety.value}>"

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        name = self.spec.name
        ctx = RunContext(
            deps=self.deps(),
            model=self.model,
            usage=RunUsage(),
            tool_call_id=context.call_id if context is not None else None,
            tool_name=name,
        )
        async with self.toolset:
            found = (await self.toolset.get_tools(ctx)).get(name)
            if found is None:
                raise UnknownToolError(f"the toolset no longer offers {name!r}")
            try:
                validated = found.args_validator.validate_python(dict(arguments))
            except ValidationError as exc:
                raise ToolArgumentsError(f"{name}: {exc}") from exc
            try:
                with _SLOT.holding(context):
                    value = await self.toolset.call_tool(name, validated, ctx, found)
            except ModelRetry as exc:
                raise ToolError(exc.message) from exc
            except ToolFailed as exc:
                raise ToolError(str(exc)) from exc
        return pydantic_core.to_jsonable_python(value)
