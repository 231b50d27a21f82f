"""Agent: a model, its tools and its limits, and the three ways to start a drive of a run
(``run``, ``resume``, ``submit``).

A drive is ``runtime.loop.RunDrive`` (the run level: the lease, replay, model turns, the end);
each pending call is run to its typed outcome by ``runtime.calls``. The rules of both levels are
those of ``docs/guarantee.md``, and these modules are their one implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from runtime.approval import ApprovalPolicy
from runtime.children import ChildTool
from runtime.errors import (
    ConfigError,
)
from runtime.events.stream import RunStream, stream
from runtime.functions import FunctionTool
from runtime.journal.codec import unstorable, unstorable_text
from runtime.journal.journal import Journal
from runtime.logs import get_logger
from runtime.loop import RunDrive
from runtime.model import Model
from runtime.result import RunResult
from runtime.retry import MODEL_RETRY, TOOL_RETRY, RetryingModel, RetryPolicy
from runtime.tools import (
    Tool,
    ToolSpec,
    validate_tool_name,
)

__all__ = ["Agent"]

log = get_logger(__name__)


class Agent:
    """A definition of an agent: a model, tools and limits. Holds no connection.

    One Agent drives many runs, concurrently too: ``await agent.run(run_id, input,
    journal=journal)``. Build it in a module and the CLI can name it ``module:attr``.
    """

    def __init__(
        self,
        *,
        model: Model,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        max_turns: int = 20,
        name: str | None = None,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
    ):
        if not isinstance(model, Model):
            raise ConfigError(f"model must implement Model.complete, got {model!r}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError("max_turns must be a positive integer")
        if (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise ConfigError("max_concurrency must be a positive integer")
        self.model = model
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.name = name or "agent"
        problem = unstorable_text(self.name, name="agent name")
        if problem is not None:
            raise ConfigError(f"an agent's name must be storable in the journal: {problem}")
        self.max_concurrency = max_concurrency
        self.tool_retry = tool_retry or TOOL_RETRY
        self.model_retry = model_retry or MODEL_RETRY
        self._retrying_model = RetryingModel(model, self.model_retry)
        self.tools: dict[str, Tool] = {}
        self._validators: dict[str, Any] = {}
        for t in tools:
            # A @tool's schemas are pydantic's and built when first needed (a drive that only
            # replays never needs them); every other tool's are checked now.
            spec = t.declared if isinstance(t, FunctionTool) else getattr(t, "spec", None)
            if spec is None or not callable(getattr(t, "call", None)):
                raise ConfigError(f"{t!r} is not a Tool (it needs .spec and async .call)")
            validate_tool_name(spec.name)
            if spec.approval is not None and not isinstance(spec.approval, ApprovalPolicy):
                raise ConfigError(
                    f"tool {spec.name}: approval must be an ApprovalPolicy "
                    "(single_approval() or ApprovalPolicy(need=..., approvers=...))"
                )
            if spec.name in self.tools:
                raise ConfigError(f"two tools of agent {self.name!r} are named {spec.name!r}")
            self.tools[spec.name] = t
            if not isinstance(t, FunctionTool):
                self._validators[spec.name] = _validator(spec.name, spec.input_schema)
        self.delegates = any(
            getattr(t, "is_child_agent", False) is True for t in self.tools.values()
        )
        """Whether a tool of this agent is another agent (``as_tool``): its calls are child runs."""

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> ChildTool:
        """This agent as a tool of another: each call is a durable child run of this agent, with
        the call's ``input``, whose id is derived from the parent run's and the call's
        (``runtime.children``). Its Safety is what this agent's tools make it: READ_ONLY if
        they all only read, IDEMPOTENT if none is a SIDE_EFFECT, else a SIDE_EFFECT (resumed
        from the child's journal after a crash, never run blindly again)."""
        return ChildTool(self, name=name, description=description, timeout=timeout)

    @cached_property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool's spec, as the model is told them (built on first use)."""
        return tuple(t.spec for t in self.tools.values())

    def __repr__(self) -> str:
        return f"<Agent {self.name} tools={list(self.tools)}>"

    async def run(
        self,
        run_id: str,
        input: str,
        *,
        journal: Journal,
        spec: str | None = None,
        wait: float | None = None,
    ) -> RunResult:
        """Start the run ``run_id`` with ``input``, or resume it if it exists.

        A finished run returns its recorded result without calling the model or any tool; an
        existing run with a different input is a ``ConfigError``. ``spec`` (``module:attr``) is
        journaled at start so that an operator can resume the run without naming the agent.

        The drive holds the run's lease: a run another live owner drives raises ``RunBusy``
        naming it, unless ``wait`` (seconds) lets the lease be released or expire first.
        """
        _check_input(run_id, input)
        _ = self.specs  # a new run journals them: a tool without schemas fails it unwritten
        return await RunDrive(self, journal, run_id, wait=wait).go(input, spec)

    def stream(
        self,
        run_id: str,
        input: str | None,
        *,
        journal: Journal,
        after: int | str = 0,
        spec: str | None = None,
        wait: float | None = None,
    ) -> RunStream:
        """Drive the run as ``run`` does (``input`` None: resume it) and yield its events as they
        happen: ``async for event in agent.stream(...)`` (``runtime.events``); the stream's
        ``result`` is the drive's once the loop ends. ``after`` skips the journaled events up to
        that cursor. Leaving the loop early does not stop the drive."""
        if input is not None:
            _check_input(run_id, input)
        return stream(self, run_id, input, journal=journal, after=after, spec=spec, wait=wait)

    async def resume(
        self, run_id: str, *, journal: Journal, wait: float | None = None
    ) -> RunResult:
        """Drive an existing run again from its journal, with its recorded input."""
        return await RunDrive(self, journal, run_id, wait=wait).go(None, None)

    async def submit(
        self, run_id: str, input: str, *, journal: Journal, spec: str | None = None
    ) -> RunResult:
        """Start the run durably and return at once, without driving it: status ``submitted``
        until a worker (or ``resume``) drives it. ``spec`` tells a worker how to rebuild this
        agent. A run that exists already is left as it is and its status returned."""
        _check_input(run_id, input)
        _ = self.specs  # a new run journals them: a tool without schemas fails it unwritten
        return await RunDrive(self, journal, run_id, submit_only=True).go(input, spec)

    def validate_arguments(self, tool: str, arguments: Any) -> str | None:
        """Why ``arguments`` do not fit the tool's input schema, or ``None`` if they do."""
        import jsonschema

        if not isinstance(arguments, Mapping):
            return f"arguments must be a JSON object, not {type(arguments).__name__}"
        validator = self._validators.get(tool)
        if validator is None:
            spec = self.tools[tool].spec
            validator = self._validators[tool] = _validator(spec.name, spec.input_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"


def _check_input(run_id: str, input: object) -> None:
    if not isinstance(input, str):
        raise ConfigError("a run's input is a string")
    problem = unstorable(input, name="input")
    if problem is not None:
        raise ConfigError(f"run {run_id!r}: cannot journal its {problem}", run_id=run_id)


def _validator(name: str, schema: Mapping[str, Any]) -> Any:
    import jsonschema  # only to check a schema or arguments

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise ConfigError(f"tool {name}: invalid input schema: {exc.message}") from exc
    return cls(schema)
