"""An OpenAI Agents SDK model as a bide Model: each response is one journaled, memoised turn.
A typed answer is asked for with bide's output schema (``runtime.output``) and validated by bide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import AgentsException, UserError
from agents.model_settings import ModelSettings
from agents.models.interface import Model as SDKModel
from agents.models.interface import ModelTracing
from agents.strict_schema import ensure_strict_json_schema
from agents.tool import FunctionTool

from adapters.openai_agents._items import to_input_items, to_turn
from adapters.openai_agents.handoffs import handed_items
from runtime import OutputSpec
from runtime.errors import ModelError
from runtime.messages import AssistantTurn, Message
from runtime.tools import ToolSpec

__all__ = ["AgentsSDKModel"]


class AgentsSDKModel:
    """Asks an Agents SDK ``Model`` for the next turn of a bide run (only for a turn the
    journal does not hold). Tools are described by the SDK's own ``FunctionTool`` objects."""

    def __init__(
        self,
        model: SDKModel,
        *,
        settings: ModelSettings | None = None,
        tools: Mapping[str, FunctionTool] | None = None,
        handed: bool = False,
    ):
        self.model = model
        self.settings = settings or ModelSettings()
        self.tools = dict(tools or {})
        self.handed = handed
        """Runs of this model's agent are handed off to: their input is the conversation."""

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        output: OutputSpec | None = None,
    ) -> AssistantTurn:
        offered: list[Any] = [self.tools[spec.name] for spec in tools if spec.name in self.tools]
        # A handoff is offered as a function tool: bide runs it (a child run), never the SDK.
        offered += [_described(spec) for spec in tools if spec.name not in self.tools]
        items = handed_items(messages) if self.handed else None
        try:
            response = await self.model.get_response(
                system_prompt,
                to_input_items(messages) if items is None else items,
                self.settings,
                offered,
                None if output is None else BideOutputSchema(output),
                [],
                ModelTracing.DISABLED,
                previous_response_id=None,
                conversation_id=None,
                prompt=None,
            )
        except AgentsException as exc:
            raise ModelError(f"the Agents SDK model failed: {exc}") from exc
        return to_turn(response)


def _described(spec: ToolSpec) -> FunctionTool:
    """A tool bide runs itself, described to the SDK's model (never invoked by the SDK)."""

    async def never(context: Any, arguments: str) -> Any:
        raise UserError(f"{spec.name} is run by bide, not by the SDK")

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=dict(spec.input_schema),
        on_invoke_tool=never,
        strict_json_schema=False,
    )


class BideOutputSchema(AgentOutputSchemaBase):
    """bide's output schema as the SDK's models take one: the model answers with JSON text of
    that schema, which bide validates (``runtime.output``), never the SDK."""

    def __init__(self, spec: OutputSpec):
        self.spec = spec
        try:
            self.schema = ensure_strict_json_schema(dict(spec.schema))
            self.strict = True
        except UserError:
            self.schema, self.strict = dict(spec.schema), False

    def is_plain_text(self) -> bool:
        return False

    def name(self) -> str:
        return self.spec.type_name

    def json_schema(self) -> dict[str, Any]:
        return self.schema

    def is_strict_json_schema(self) -> bool:
        return self.strict

    def validate_json(self, json_str: str) -> Any:
        raise UserError("bide validates a typed answer itself (runtime.output)")
