"""Sub-agents: an agent used as a tool of another (``Agent.as_tool``), each call a durable child
run of its own, whose id is derived from the parent run's and the call's, linked both ways in the
journal: the child's start record names its parent and call, the parent's call journals the
child's run id (a handle, for a child that may act; its result otherwise).

A crash anywhere in the tree: resuming the parent drives the same child run again, which resumes
from its own journal (a child that completed is replayed from its end record, without a model
call), so a child's side effect is at most once like any other. A child that halts or waits
makes its parent wait on it (a question naming the child and why it stopped); once the child is
resolved or answered, resuming the parent drives the child on and carries on. Cancelling the
parent cancels its open children when its drive next runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from runtime.driving import driving
from runtime.errors import ConfigError, RunBusy, ToolError, ToolOutcomeUnknown
from runtime.limits import Outer, spent
from runtime.logs import get_logger
from runtime.result import RunResult, RunStatus
from runtime.state import RunState
from runtime.tools import Safety, ToolContext, ToolSpec
from runtime.tree import spent_below

if TYPE_CHECKING:
    from runtime.drive import DrivenAgent
    from runtime.journal.journal import Journal
    from runtime.loop import RunDrive


class Agent(Protocol):
    """What a child tool needs of its agent (``runtime.agent.Agent`` is one); the drive takes
    the agent itself."""

    name: str

    @property
    def specs(self) -> tuple[ToolSpec, ...]: ...


__all__ = ["ChildTool", "child_run_id", "run_as_child"]

log = get_logger(__name__)

CHILD_WAIT = 10.0
"""Seconds a parent waits for a child run's lease held by another process (a worker driving
the child on its own) before its call's outcome is unknown."""


def child_run_id(parent: str, call_id: str) -> str:
    """The child run of ``parent``'s call ``call_id``: ``PARENT/CALL`` (readable), the call's
    ``%`` and ``/`` escaped so that no two (parent, call) pairs give one id. Past 256 characters
    the end is a digest of the pair instead."""
    call = call_id.replace("%", "%25").replace("/", "%2F")
    derived = f"{parent}/{call}"
    if len(derived) <= 256:
        return derived
    digest = hashlib.sha256(f"{len(parent)}:{parent}/{call_id}".encode()).hexdigest()[:32]
    return f"{parent[:200]}/~{digest}"


async def run_as_child(
    agent: DrivenAgent,
    run_id: str,
    input: str,
    *,
    journal: Journal,
    parent: str,
    call_id: str,
    wait: float | None = None,
) -> RunResult[Any]:
    """``agent.run(run_id, input, ...)`` for a run that a call of another drives (an adapter's
    guarded call, say): a new run's start names ``parent`` and ``call_id``, so that ``show``
    lists it among the parent's children and ``resolve`` points at the parent."""
    from runtime.loop import RunDrive

    drive = RunDrive(agent, journal, run_id, wait=wait)
    drive.parent = {"run_id": parent, "call_id": call_id}
    return await drive.go(input, None)


def _safety(agent: Agent) -> Safety:
    """What the child's tools make it: READ_ONLY if every tool only reads, IDEMPOTENT if each
    is READ_ONLY or IDEMPOTENT, else a SIDE_EFFECT."""
    kinds = {spec.safety for spec in agent.specs}
    if kinds <= {Safety.READ_ONLY}:
        return Safety.READ_ONLY
    if kinds <= {Safety.READ_ONLY, Safety.IDEMPOTENT}:
        return Safety.IDEMPOTENT
    return Safety.SIDE_EFFECT


class ChildTool:
    """``agent.as_tool(...)``: each call drives a child run of ``agent`` with the call's
    ``input`` and returns its output (``Agent.as_tool``)."""

    is_child_agent = True
    """Tells ``Agent`` that its drives must say which drive runs its tools (``driving``)."""

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ):
        self.agent = agent
        self.spec = ToolSpec(
            name=name or agent.name,
            description=description or f"Hand a task to the agent {agent.name}: give its input.",
            input_schema={
                "type": "object",
                "properties": {"input": {"type": "string", "description": "the task"}},
                "required": ["input"],
                "additionalProperties": False,
            },
            safety=_safety(agent),
            timeout=timeout,
        )

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        parent: RunDrive | None = driving.get()
        if parent is None or context is None:
            raise ConfigError(
                f"tool {self.spec.name} drives a child run: it runs only as a tool of an agent's "
                "run (Agent.as_tool)"
            )
        child = child_run_id(parent.run_id, context.call_id)
        # Journaled before the child starts (for a child that may act): from here a crash
        # resumes the child through ``resume``, never halts blindly, never starts a second one.
        await context.record_handle({"child_run": child})
        return await self._drive(
            parent, child, self.child_input(arguments, parent.state, context), context
        )

    def child_input(
        self, arguments: Mapping[str, Any], parent: RunState, context: ToolContext
    ) -> str:
        """The child run's input for this call: the same on every drive of the call (the
        child's start pins it). Here the call's ``input`` argument; a subclass (an adapter's
        handoff) may derive it from the parent run's recorded state instead."""
        return str(arguments.get("input", ""))

    def value(self, child: str, result: RunResult[Any]) -> Any:
        """What the call returns for a completed child: its run id and output."""
        return {"child_run": child, "output": result.output}

    async def resume(self, handle: Any, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        parent: RunDrive | None = driving.get()
        child = handle.get("child_run") if isinstance(handle, Mapping) else None
        if parent is None or not isinstance(child, str):
            raise ToolOutcomeUnknown(f"{self.spec.name}: no child run to resume from {handle!r}")
        return await self._drive(
            parent, child, self.child_input(arguments, parent.state, context), context
        )

    async def cancel_handle(self, handle: Any, context: ToolContext) -> None:
        """The parent is cancelled: cancel the child run (it ends when next driven)."""
        parent: RunDrive | None = driving.get()
        child = handle.get("child_run") if isinstance(handle, Mapping) else None
        if parent is None or not isinstance(child, str):
            return
        state = await parent.journal.state(child)
        if state is not None and state.end is None:
            await parent.journal.cancel(child, reason=f"its parent {parent.run_id} was cancelled")

    async def _drive(self, parent: RunDrive, child: str, input: str, context: ToolContext) -> Any:
        from runtime.loop import RunDrive

        # as_tool is the only maker of a ChildTool: its agent is a runtime.agent.Agent.
        drive = RunDrive(self.agent, parent.journal, child, wait=CHILD_WAIT)  # type: ignore[arg-type]
        drive.parent = {"run_id": parent.run_id, "call_id": context.call_id}
        drive.outer = await _outer(parent, child)
        log.info("child_started", child_run=child, call_id=context.call_id)
        try:
            result = await drive.go(input, None)
        except RunBusy as exc:
            raise ToolOutcomeUnknown(
                f"child run {child} is driven by another process: {exc}"
            ) from exc
        log.info("child_stopped", child_run=child, status=result.status.value)
        return await self._outcome(child, result, context)

    async def _outcome(self, child: str, result: RunResult[Any], context: ToolContext) -> Any:
        status = result.status
        if status is RunStatus.COMPLETED:
            return self.value(child, result)
        if status is RunStatus.FAILED:
            raise ToolError(f"child run {child} failed: {result.error}")
        if status is RunStatus.CANCELLED:
            raise ToolError(f"child run {child} was cancelled")
        why = _why(result)
        # The parent waits on the child: a question that names it. Resolve or answer the
        # child, then resume the parent: the child is driven on from its journal.
        key = f"child:{status.value}:{why[1]}"[:128]
        await context.interrupt(
            key,
            f"child run {child} is {status.value}: {why[0]}; settle it there "
            f"(python -m runtime show {child}), then resume this run",
        )
        # Answered here instead of in the child: the child still stands where it stopped.
        raise ToolOutcomeUnknown(
            f"child run {child} is still {status.value} ({why[0]}); an answer to its parent "
            "does not settle it"
        )


async def _outer(parent: RunDrive, child: str) -> tuple[Outer, ...]:
    """The limits above ``child``: its parent's, with what the parent's tree spent outside
    this child (the parent's records, its other children's), and the parent's own ``outer``,
    each with that added."""
    limits = parent.agent.usage_limits
    if limits is None and not parent.outer:
        return ()
    used = spent(parent.state, output_calls=parent.agent.output is not None)
    used = used + await spent_below(parent.journal, parent.state, leave=child)
    above = tuple(Outer(o.run_id, o.limits, o.outside + used) for o in parent.outer)
    return above if limits is None else (*above, Outer(parent.run_id, limits, used))


def _why(result: RunResult[Any]) -> tuple[str, str]:
    """What a stopped child stopped on, said, and as a short key part."""
    for halt in result.halts:
        return (
            f"{halt.call_id} {halt.tool} halted: {halt.cause}",
            f"{halt.call_id}.{halt.attempt}",
        )
    for waiting in result.waiting:
        return (f"{waiting.call_id} {waiting.tool} waits for {waiting.kind}", waiting.call_id)
    return ("it stopped", "stopped")
