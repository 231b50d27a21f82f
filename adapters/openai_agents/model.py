"""An OpenAI Agents SDK model as a bide Model: each response is one journaled, memoised turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agents.exceptions import AgentsException
from agents.model_settings import ModelSettings
from agents.models.interface import Model as SDKModel
from agents.models.interface import ModelTracing
from agents.tool import FunctionTool

from adapters.openai_agents._items import to_input_items, to_turn
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
    ):
        self.model = model
        self.settings = settings or ModelSettings()
        self.tools = dict(tools or {})

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        offered = [self.tools[spec.name] for spec in tools if spec.name in self.tools]
        try:
            response = await self.model.get_response(
                system_prompt,
                to_input_items(messages),
                self.settings,
                list(offered),
                None,
                [],
                ModelTracing.DISABLED,
                previous_response_id=None,
                conversation_id=None,
                prompt=None,
            )
        except AgentsException as exc:
            raise ModelError(f"the Agents SDK model failed: {exc}") from exc
        return to_turn(response)
