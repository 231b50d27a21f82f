"""Typed output: what a run answers when its agent has an ``output_type``.

The model gives its answer in one of two ways, and the recorded turn holds it as a call either way:

- it calls the output tool (``OutputSpec.name``, ``final_result``) with the answer as arguments
  (a provider without a native JSON response format, or a model that knows nothing of typed
  output: the runtime then offers the tool itself);
- it answers with text that is JSON (a provider's JSON-schema response format): the turn is
  recorded with an added call ``bide_output_<n>`` whose arguments are the parsed JSON (or
  ``None`` when the text is not JSON). Such a call is shown to the model as the text it wrote,
  and its error result as a user message (``as_conversation``).

The runtime settles these calls itself, never as tools: a valid answer is recorded as the call's
value (the validated value's JSON) and ends the run; an invalid one as an error result the model
sees as its retry prompt. The retries a run used are counted from its turns alone (every turn
with an output call that did not end the run failed validation), so a resume continues the count.

A user tool named in ``Agent(output_tools=...)`` ends the run with its (validated) value too. A
turn's first output call is the only one that may give the output: a later one in the same turn
is refused (recorded as an error result, never run), so an output tool runs at most once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from runtime.errors import ConfigError
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage, UserMessage
from runtime.tools import Safety, ToolSpec

if TYPE_CHECKING:
    from runtime.state import RunState

__all__ = [
    "OUTPUT_TOOL",
    "TEXT_CALL_PREFIX",
    "Invalid",
    "OutputSpec",
    "OutputType",
    "accepts_output",
    "as_conversation",
    "retries_used",
    "with_output_call",
]

T = TypeVar("T")

OUTPUT_TOOL = "final_result"
"""The name of the output tool the model calls with its answer."""

TEXT_CALL_PREFIX = "bide_output_"
"""The id of a call the runtime adds to a turn that answered with text (``bide_output_<n>``)."""

WRAP_KEY = "response"
"""The one property of the object schema that wraps an answer that is not an object."""


class Invalid(Exception):
    """An answer that does not fit the output type; the message is what the model is told."""


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How a model is asked for a typed answer: ``Model.complete(..., output=spec)``.

    ``schema`` is a JSON object schema (an answer that is not an object is wrapped in
    ``{"response": ...}``, ``wrapped``): a provider with a JSON-schema response format asks for
    it as the response's format, any other offers ``tool()`` and the model calls it.
    """

    name: str
    description: str
    schema: Mapping[str, Any]
    wrapped: bool
    type_name: str

    def tool(self) -> ToolSpec:
        """The output tool, as a model that answers by calling a tool is offered it."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=self.schema,
            safety=Safety.READ_ONLY,
        )

    def wrap(self, value: Any) -> Any:
        """The arguments (or JSON text's object) that carry ``value`` (already JSON)."""
        return {WRAP_KEY: value} if self.wrapped else value


class OutputType(Generic[T]):
    """An agent's output type: its schema, and how an answer is validated and kept."""

    def __init__(self, output_type: Any):
        from pydantic import TypeAdapter
        from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

        try:
            self.adapter: TypeAdapter[T] = TypeAdapter(output_type)
            schema = dict(self.adapter.json_schema())
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
            raise ConfigError(f"output_type {output_type!r} has no JSON schema: {exc}") from exc
        self.type = output_type
        name = getattr(output_type, "__name__", None) or str(output_type)
        wrapped = schema.get("type") != "object"
        if wrapped:
            defs = schema.pop("$defs", None)
            schema = {
                "type": "object",
                "properties": {WRAP_KEY: schema},
                "required": [WRAP_KEY],
                **({"$defs": defs} if defs else {}),
            }
        self.spec = OutputSpec(
            name=OUTPUT_TOOL,
            description=(
                f"Give your final answer (a {name}) by calling this tool once. Call it only when "
                "you are done."
            ),
            schema=schema,
            wrapped=wrapped,
            type_name=name,
        )

    def validate_arguments(self, arguments: Any) -> T:
        """The value an output call's arguments carry; ``Invalid`` saying what is wrong."""
        value = arguments
        if self.spec.wrapped:
            if not isinstance(arguments, Mapping) or WRAP_KEY not in arguments:
                raise Invalid(
                    f"the answer must be a JSON object with the key {WRAP_KEY!r} holding a "
                    f"{self.spec.type_name}"
                )
            value = arguments[WRAP_KEY]
        return self.validate(value)

    def validate(self, value: Any) -> T:
        from pydantic import ValidationError

        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise Invalid(_describe(exc)) from None

    def dump(self, value: T) -> Any:
        """The value as JSON data (what the end record holds)."""
        return self.adapter.dump_python(value, mode="json")

    def load(self, data: Any, *, run_id: str) -> T:
        """The value a run's end record holds, as this output type."""
        try:
            return self.validate(data)
        except Invalid as exc:
            raise ConfigError(
                f"run {run_id!r} ended with an output that is not a {self.spec.type_name} "
                f"(was the agent's output_type changed?): {exc}",
                run_id=run_id,
            ) from None


def _describe(exc: Any) -> str:
    lines = []
    for error in exc.errors()[:10]:
        where = ".".join(str(p) for p in error.get("loc", ()))
        lines.append(f"{where or '(the answer)'}: {error.get('msg')}")
    more = exc.error_count() - len(lines)
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


def with_output_call(turn: AssistantTurn, n: int) -> AssistantTurn:
    """A turn that answered with text and no call, with the output call that carries it."""
    if turn.tool_calls or turn.text is None:
        return turn
    try:
        arguments = json.loads(turn.text)
    except ValueError:
        arguments = None
    call = ToolCall(f"{TEXT_CALL_PREFIX}{n}", OUTPUT_TOOL, arguments)
    return AssistantTurn(turn.text, (call,), turn.usage, turn.finish_reason)


def is_text_call(call: ToolCall) -> bool:
    return call.name == OUTPUT_TOOL and call.id.startswith(TEXT_CALL_PREFIX)


def as_conversation(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages as the model is shown them: a text answer's output call as the text it
    wrote, and that call's error result as a user message asking again."""
    if not any(isinstance(m, AssistantTurn) and _has_text_call(m) for m in messages):
        return messages
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantTurn) and _has_text_call(message):
            calls = tuple(c for c in message.tool_calls if not is_text_call(c))
            finish = message.finish_reason
            out.append(AssistantTurn(message.text, calls, message.usage, finish))
        elif isinstance(message, ToolResultMessage) and message.call_id.startswith(
            TEXT_CALL_PREFIX
        ):
            out.append(UserMessage(retry_prompt(message.content)))
        else:
            out.append(message)
    return out


def _has_text_call(turn: AssistantTurn) -> bool:
    return any(is_text_call(c) for c in turn.tool_calls)


def retry_prompt(content: Any) -> str:
    message = content.get("message") if isinstance(content, Mapping) else content
    return f"Your answer was not valid: {message}. Answer again, correctly."


def is_output_call(call: ToolCall, output_tools: Iterable[str]) -> bool:
    return call.name == OUTPUT_TOOL or call.name in output_tools


def retries_used(state: RunState, output_tools: Iterable[str]) -> int:
    """How many answers failed validation: every turn whose first output call is the output
    tool's and did not end the run (a valid one ends it), the last turn included."""
    used = 0
    for turn in state.turns:
        first = next((c for c in turn.tool_calls if is_output_call(c, output_tools)), None)
        used += first is not None and first.name == OUTPUT_TOOL
    return used


def accepts_output(model: object) -> bool:
    """Whether ``model.complete`` takes the ``output`` keyword (else the runtime offers the
    output tool itself, among the tools)."""
    import inspect

    try:
        parameters = inspect.signature(model.complete).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return "output" in parameters and parameters["output"].kind in kinds
