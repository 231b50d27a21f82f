"""Agent: a model, its tools and its limits, and the three ways to start a drive of a run
(``run``, ``resume``, ``submit``).

A drive is ``runtime.loop.RunDrive`` (the run level: the lease, replay, model turns, the end);
each pending call is run to its typed outcome by ``runtime.calls``. The rules of both levels are
those of ``docs/guarantee.md``, and these modules are their one implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import Any, Generic, TypeVar, cast, overload

from runtime.approval import ApprovalPolicy
from runtime.argcheck import flat_check
from runtime.children import ChildTool
from runtime.errors import (
    ConfigError,
)
from runtime.events.stream import RunStream, stream
from runtime.functions import FunctionTool
from runtime.journal.journal import Journal
from runtime.jsontext import unstorable, unstorable_text
from runtime.limits import UsageLimits
from runtime.logs import get_logger
from runtime.loop import RunDrive
from runtime.model import Model
from runtime.output import OUTPUT_TOOL, OutputType, accepts_output
from runtime.result import RunResult, RunStatus
from runtime.retry import MODEL_RETRY, TOOL_RETRY, RetryingModel, RetryPolicy
from runtime.sessions import SESSION_PREFIX, HistoryHook, claim, journal_id, messages_of
from runtime.store.queues import Queues
from runtime.tools import (
    Tool,
    ToolSpec,
    validate_tool_name,
)

__all__ = ["Agent", "Session"]

log = get_logger(__name__)

OutputT = TypeVar("OutputT")
T2 = TypeVar("T2")


class Agent(Generic[OutputT]):
    """A definition of an agent: a model, tools and limits. Holds no connection.

    One Agent drives many runs, concurrently too: ``await agent.run(run_id, input,
    journal=journal)``. Build it in a module and the CLI can name it ``module:attr``.

    With ``output_type`` (a pydantic model, a dataclass, a TypedDict, a plain type or a union)
    a run's answer is validated and ``RunResult.output`` is the value (``Agent[OutputT]``); an
    invalid answer goes back to the model at most ``output_retries`` times
    (``runtime.output``). A tool named in ``output_tools`` ends the run with its value.
    ``usage_limits`` caps what each run may spend (``runtime.limits``).
    Without it the output is the model's last text (``Agent[str]``). For a union, name the
    type: ``Agent[A | B](output_type=A | B, ...)``.
    """

    @overload
    def __init__(
        self: Agent[str],
        *,
        model: Model,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        max_turns: int = 20,
        name: str | None = None,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
        output_type: None = None,
        output_retries: int = 1,
        output_tools: Iterable[str] = (),
        usage_limits: UsageLimits | None = None,
        session_history: HistoryHook | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[OutputT],
        *,
        model: Model,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        max_turns: int = 20,
        name: str | None = None,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
        output_type: type[OutputT],
        output_retries: int = 1,
        output_tools: Iterable[str] = (),
        usage_limits: UsageLimits | None = None,
        session_history: HistoryHook | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[OutputT],
        *,
        model: Model,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        max_turns: int = 20,
        name: str | None = None,
        max_concurrency: int = 8,
        tool_retry: RetryPolicy | None = None,
        model_retry: RetryPolicy | None = None,
        output_type: object,
        output_retries: int = 1,
        output_tools: Iterable[str] = (),
        usage_limits: UsageLimits | None = None,
        session_history: HistoryHook | None = None,
    ) -> None: ...

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
        output_type: object = None,
        output_retries: int = 1,
        output_tools: Iterable[str] = (),
        usage_limits: UsageLimits | None = None,
        session_history: HistoryHook | None = None,
    ) -> None:
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
        self._accepts: dict[str, Callable[[Mapping[str, Any]], bool] | None] = {}
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
        if (
            isinstance(output_retries, bool)
            or not isinstance(output_retries, int)
            or output_retries < 0
        ):
            raise ConfigError("output_retries must be an integer >= 0")
        self.output_retries = output_retries
        self.output: OutputType[OutputT] | None = None
        """The output type's schema and validation; None: the output is the model's text."""
        if output_type is not None and output_type is not str:
            self.output = OutputType(output_type)
            if OUTPUT_TOOL in self.tools:
                raise ConfigError(
                    f"a tool of agent {self.name!r} is named {OUTPUT_TOOL!r}, the name of the "
                    "output tool of an agent with an output_type"
                )
        if isinstance(output_tools, str):
            raise ConfigError("output_tools is a list of tool names, not a string")
        self.output_tools = frozenset(output_tools)
        """Tools whose value ends the run as its output (at most one call per run)."""
        for tool_name in self.output_tools:
            if tool_name not in self.tools:
                raise ConfigError(f"output tool {tool_name!r} is not a tool of the agent")
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise ConfigError(f"usage_limits must be a UsageLimits, not {usage_limits!r}")
        self.usage_limits = usage_limits
        """What each run may spend (``runtime.limits``), counted from its journal."""
        if session_history is not None and not callable(session_history):
            raise ConfigError("session_history must be a function of the earlier messages")
        self.session_history = session_history
        """What a session's message shows its model of the earlier ones (``runtime.sessions``)."""
        self.answers = self.output is not None or bool(self.output_tools)
        """Whether a drive settles typed answers (``runtime.answers``)."""
        self.asks_output = self.output is not None and accepts_output(model)
        """Whether the model is given the output spec (else it is offered the output tool)."""
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
        session: str | None = None,
    ) -> RunResult[OutputT]:
        """Start the run ``run_id`` with ``input``, or resume it if it exists.

        A finished run returns its recorded result without calling the model or any tool; an
        existing run with a different input is a ``ConfigError``. ``spec`` (``module:attr``) is
        journaled at start so that an operator can resume the run without naming the agent.

        The drive holds the run's lease: a run another live owner drives raises ``RunBusy``
        naming it, unless ``wait`` (seconds) lets the lease be released or expire first.

        ``session``: the run is the session's next message (``runtime.sessions``), and its
        model sees the earlier ones; a session whose previous message has not ended raises
        ``SessionBusy``, unless it ends within ``wait`` seconds.
        """
        _check_input(run_id, input)
        _ = self.specs  # a new run journals them: a tool without schemas fails it unwritten
        drive = RunDrive(self, journal, run_id, wait=wait)
        if session is not None:
            drive.session = await claim(
                journal.store, session, run_id, hook=self.session_history, wait=wait
            )
        result = await drive.go(input, spec)
        return cast("RunResult[OutputT]", result)

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
        self,
        run_id: str,
        *,
        journal: Journal,
        wait: float | None = None,
        override_agent: bool = False,
    ) -> RunResult[OutputT]:
        """Drive an existing run again from its journal, with its recorded input.

        A run another agent (by name) started is a ``ConfigError`` naming both, unless
        ``override_agent``: a deliberate fix (a new budget, a fixed build), under which the
        run's recorded calls keep the Safety they ran under."""
        drive = RunDrive(self, journal, run_id, wait=wait)
        drive.any_agent = override_agent
        result = await drive.go(None, None)
        return cast("RunResult[OutputT]", result)

    async def submit(
        self,
        run_id: str,
        input: str,
        *,
        journal: Journal,
        spec: str | None = None,
        session: str | None = None,
        queue: str | None = None,
        concurrency_key: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
        debounce: float | None = None,
    ) -> RunResult[OutputT]:
        """Start the run durably and return at once, without driving it: status ``submitted``
        until a worker (or ``resume``) drives it. ``spec`` tells a worker how to rebuild this
        agent. A run that exists already is left as it is and its status returned.
        ``session``: the run is the session's next message, as for ``run`` (a session whose
        last message has not ended raises ``SessionBusy``).

        ``queue``: workers start the run only when the queue's limits admit it
        (``journal.queues``), highest ``priority`` first, then oldest; ``concurrency_key``
        counts it against the queue's per-key limit. ``dedup_key``: while a run of the queue
        with this key has not ended, no run is made and that run's status is returned (its
        ``run_id`` says which). ``debounce`` (seconds, with a ``dedup_key``): the run starts
        only once no submit of its key came for that long (the first submit's input stands).
        """
        _check_input(run_id, input)
        holder = await _enqueue(
            journal, run_id, queue, concurrency_key, priority, dedup_key, debounce, session
        )
        if holder is not None and holder != run_id:
            status = await journal.status(holder)
            known = {s.value for s in RunStatus}
            log.info("submit_deduplicated", run_id=run_id, holder=holder, dedup_key=dedup_key)
            return RunResult(
                run_id=holder,
                status=RunStatus(status) if status in known else RunStatus.SUBMITTED,
            )
        _ = self.specs  # a new run journals them: a tool without schemas fails it unwritten
        drive = RunDrive(self, journal, run_id, submit_only=True)
        if session is not None:
            drive.session = await claim(journal.store, session, run_id, hook=self.session_history)
        result = await drive.go(input, spec)
        return cast("RunResult[OutputT]", result)

    def validate_arguments(self, tool: str, arguments: Any) -> str | None:
        """Why ``arguments`` do not fit the tool's input schema, or ``None`` if they do."""
        if not isinstance(arguments, Mapping):
            return f"arguments must be a JSON object, not {type(arguments).__name__}"
        if tool not in self._accepts:
            self._accepts[tool] = flat_check(self.tools[tool].spec.input_schema)
        accepts = self._accepts[tool]
        if accepts is not None and accepts(arguments):
            # What jsonschema would say, without walking it, nor building (or importing) it
            # for a schema the flat check reads, which is valid JSON Schema (argcheck.py).
            return None
        import jsonschema

        validator = self._validators.get(tool)
        if validator is None:
            spec = self.tools[tool].spec
            validator = self._validators[tool] = _validator(spec.name, spec.input_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"


async def _enqueue(
    journal: Journal,
    run_id: str,
    queue: str | None,
    key: str | None,
    priority: int,
    dedup_key: str | None,
    debounce: float | None,
    session: str | None,
) -> str | None:
    """Place a submitted run in its queue before it is created (``store.queues``); the run that
    holds its place (another, for a dedup key in use), or None without a queue."""
    if queue is None:
        given = [
            name
            for name, value in (
                ("concurrency_key", key),
                ("dedup_key", dedup_key),
                ("debounce", debounce),
            )
            if value is not None
        ]
        if priority != 0:
            given.append("priority")
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise ConfigError(
                f"{', '.join(given)} {verb} a queue: submit(..., queue=NAME) (on the command "
                "line, --queue NAME)"
            )
        return None
    if session is not None:
        raise ConfigError("a session's message is not queued: give session or queue, not both")
    store = journal.store
    if not isinstance(store, Queues):
        raise ConfigError(f"the journal's store ({type(store).__name__}) keeps no queues")
    if await store.check_run(run_id):
        return None  # it exists: left as it is, queued or not, as submit leaves any run
    return await store.enqueue(
        run_id, queue, key=key, priority=priority, dedup_key=dedup_key, debounce=debounce
    )


def _check_input(run_id: str, input: object) -> None:
    if isinstance(run_id, str) and run_id.startswith(SESSION_PREFIX):
        raise ConfigError(f"run ids that start with {SESSION_PREFIX!r} name sessions: {run_id!r}")
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


class Session:
    """A handle on one session of a journal: ``await Session("ticket-42", journal).send(agent,
    run_id, message)`` is ``agent.run(run_id, message, session="ticket-42", journal=journal)``."""

    def __init__(self, name: str, journal: Journal):
        journal_id(name)  # a bad name fails here
        self.name = name
        self.journal = journal

    async def send(
        self, agent: Agent[T2], run_id: str, message: str, *, wait: float | None = None
    ) -> RunResult[T2]:
        """Drive ``message`` as the session's next run (or resume it, if it is one already)."""
        return await agent.run(run_id, message, session=self.name, journal=self.journal, wait=wait)

    async def runs(self) -> list[str]:
        """The session's runs, in order."""
        return [m.run_id for m in await messages_of(self.journal.store, self.name)]

    def __repr__(self) -> str:
        return f"<Session {self.name}>"
