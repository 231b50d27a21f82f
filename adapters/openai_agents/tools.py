"""An Agents SDK ``FunctionTool`` as a bide Tool: bide decides whether it may run, the SDK
parses its arguments and calls the user's function."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from agents.exceptions import ModelBehaviorError
from agents.tool import FunctionTool
from agents.tool_context import ToolContext as SDKToolContext
from agents.usage import Usage

from adapters._calls import CallSlot
from runtime.approval import single_approval
from runtime.errors import ConfigError, ToolArgumentsError
from runtime.tools import Safety, ToolContext, ToolSpec

__all__ = ["AgentsSDKTool", "call_context"]

_SLOT = CallSlot("bide_openai_agents_call", inside="a tool a DurableSDKAgent runs")


def call_context() -> ToolContext:
    """bide's context of the tool call running now (its ``idempotency_key``, ``run_id``,
    ``call_id``); only inside a tool a ``DurableSDKAgent`` runs."""
    return _SLOT.current()


class AgentsSDKTool:
    """One SDK function tool, run by bide's rules.

    The SDK's default turns any exception of a tool into a message for the model, which would
    record a side effect whose reply was lost as a success. bide runs a copy of the tool with
    that formatter off, so an exception reaches bide and a side effect halts on it."""

    def __init__(self, tool: FunctionTool, safety: Safety, *, deps: Callable[[], Any]):
        if callable(tool.needs_approval):
            raise ConfigError(
                f"tool {tool.name}: needs_approval computed per call is not supported; "
                "give True or False"
            )
        self.sdk_tool = tool
        self.raw = dataclasses.replace(
            tool, _failure_error_function=None, _use_default_failure_error_function=False
        )
        self.deps = deps
        self.spec = ToolSpec(
            name=tool.name,
            description=tool.description or "",
            input_schema=dict(tool.params_json_schema),
            safety=safety,
            approval=single_approval() if tool.needs_approval else None,
        )

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        text = json.dumps(dict(arguments))
        sdk_context = SDKToolContext(
            context=self.deps(),
            usage=Usage(),
            tool_name=self.spec.name,
            tool_call_id=context.call_id if context is not None else "",
            tool_arguments=text,
        )
        try:
            with _SLOT.holding(context):
                value = await self.raw.on_invoke_tool(sdk_context, text)
        except ModelBehaviorError as exc:
            raise ToolArgumentsError(f"{self.spec.name}: {exc}") from exc
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
        return value
