"""What a call sees of the drive it runs in (``Drive``), and what it can come to (``Outcome``).

The call level (``runtime.calls``, ``runtime.asking``, ``runtime.handles``) speaks only this
narrow handle: the run's identity, the agent's tools, the lease, and the one way to append.
``loop.RunDrive`` implements it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.errors import ConfigError
from runtime.holding import Holding
from runtime.limits import UsageLimits
from runtime.model import Model
from runtime.output import OutputType
from runtime.records import Appended
from runtime.result import Halt, Waiting
from runtime.retry import RetryingModel, RetryPolicy
from runtime.sessions import HistoryHook
from runtime.store.protocol import Store
from runtime.tools import Tool, ToolSpec

__all__ = [
    "CANCELLED",
    "RECORDED",
    "AgentTools",
    "Cancelled",
    "Drive",
    "DrivenAgent",
    "Misuse",
    "Outcome",
    "Recorded",
    "RunEnded",
]


@dataclass(frozen=True, slots=True)
class Recorded:
    """The call's outcome is in the journal: a result, an error result, or a resolution."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A cancel request was seen before the call started: it never ran."""


RECORDED = Recorded()
CANCELLED = Cancelled()

Outcome = Recorded | Halt | Waiting | Cancelled
"""What one call came to. A halt and a wait stop the run; the others let it go on."""


class RunEnded(Exception):
    """An append was refused because the run has an end record (another driver ended it)."""


class Misuse(BaseException):
    """A tool broke a rule of the drive (a SIDE_EFFECT called ``interrupt()``): its ConfigError
    stops the drive. A BaseException, so that a tool's ``except Exception`` cannot swallow it."""

    def __init__(self, error: ConfigError):
        super().__init__(str(error))
        self.error = error


class AgentTools(Protocol):
    """What a call needs of its agent."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    @property
    def tool_retry(self) -> RetryPolicy: ...

    def validate_arguments(self, tool: str, arguments: Any) -> str | None: ...


class DrivenAgent(AgentTools, Protocol):
    """What a run's drive needs of its agent (``runtime.agent.Agent`` is one): the drive is
    below the agent that starts it, and knows it by this shape alone."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> Model: ...

    @property
    def system_prompt(self) -> str | None: ...

    @property
    def specs(self) -> Sequence[ToolSpec]: ...

    @property
    def max_turns(self) -> int: ...

    @property
    def max_concurrency(self) -> int: ...

    @property
    def delegates(self) -> bool:
        """Whether a tool of the agent is another agent: its calls are child runs."""
        ...

    @property
    def _retrying_model(self) -> RetryingModel: ...

    @property
    def output(self) -> OutputType[Any] | None: ...

    @property
    def output_tools(self) -> frozenset[str]: ...

    @property
    def output_retries(self) -> int: ...

    @property
    def answers(self) -> bool: ...

    @property
    def asks_output(self) -> bool: ...

    @property
    def usage_limits(self) -> UsageLimits | None: ...

    @property
    def session_history(self) -> HistoryHook | None: ...


class Drive(Protocol):
    """What a call sees of the drive it runs in."""

    run_id: str
    key_scheme: int
    holding: Holding
    executed: int
    """How many tool invocations this drive made (a call adds its own)."""

    @property
    def agent(self) -> AgentTools: ...

    @property
    def store(self) -> Store:
        """The journal's store: its clock, and records other writers added (a signal)."""
        ...

    def cancelled(self) -> bool: ...

    async def append(
        self,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        after_end: bool = False,
    ) -> Appended:
        """Append a record; it commits with whatever the drive wrote ahead (its turn)."""
        ...

    async def flush(self) -> None:
        """Commit what the drive wrote ahead (its turn), before a call that is not READ_ONLY
        acts without a record of its own first."""
        ...
