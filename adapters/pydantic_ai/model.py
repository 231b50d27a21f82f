"""A Pydantic AI model as a bide Model: each request is one journaled, memoised turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.models import Model as PydanticModel
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from adapters.pydantic_ai._messages import to_model_messages, to_turn
from runtime.errors import ModelError
from runtime.messages import AssistantTurn, Message
from runtime.tools import ToolSpec

__all__ = ["PydanticAIModel"]


class PydanticAIModel:
    """Asks a Pydantic AI ``Model`` for the next turn of a bide run.

    bide calls it only for a turn its journal does not hold, so a resumed run never asks the
    model again for what it already answered. Tools are described to the model by their
    Pydantic AI definitions (``definitions``, by name); a tool Pydantic AI does not know (an MCP
    tool from ``adapters.mcp``) by its bide spec. ``output_tools`` are Pydantic AI's output
    tools (``final_result`` for a structured ``output_type``): a call of one is the run's final
    answer, journaled as the JSON of its arguments.
    """

    def __init__(
        self,
        model: PydanticModel,
        *,
        settings: ModelSettings | None = None,
        definitions: Mapping[str, ToolDefinition] | None = None,
        output_tools: Sequence[ToolDefinition] = (),
    ):
        self.model = model
        self.settings = settings
        self.definitions = dict(definitions or {})
        self.output_tools = list(output_tools)

    async def complete(
        self,
        system_prompt: str | None,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> AssistantTurn:
        parameters = ModelRequestParameters(
            function_tools=[self._definition(spec) for spec in tools],
            output_mode="tool" if self.output_tools else "text",
            output_tools=list(self.output_tools),
            allow_text_output=True,
        )
        settings, parameters = self.model.prepare_request(self.settings, parameters)
        history = to_model_messages(system_prompt, messages)
        try:
            response = await self.model.request(history, settings, parameters)
        except ModelHTTPError as exc:
            status = exc.status_code
            raise ModelError(
                f"{self.model.model_name}: HTTP {status}: {exc.message}",
                retryable=status == 429 or status >= 500,
                status_code=status,
            ) from exc
        except (ModelAPIError, UnexpectedModelBehavior) as exc:
            raise ModelError(f"{self.model.model_name}: {exc}") from exc
        return to_turn(response, output_tools={t.name for t in self.output_tools})

    def _definition(self, spec: ToolSpec) -> ToolDefinition:
        known = self.definitions.get(spec.name)
        if known is not None:
            return known
        return ToolDefinition(
            name=spec.name,
            description=spec.description,
            parameters_json_schema=dict(spec.input_schema),
        )
