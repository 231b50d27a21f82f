"""A drive streamed as it happens (``Agent.stream``): the run's events, read as ``follow`` reads
them, while the drive runs in a task the stream owns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from runtime.events.hub import hub_of
from runtime.events.live import events_of
from runtime.events.types import Cursor, Event
from runtime.result import RunResult
from runtime.store.checks import check_run_id

if TYPE_CHECKING:
    from runtime.journal.journal import Journal


class Agent(Protocol):
    """What a stream needs of an agent (``runtime.agent.Agent`` is one): to run and resume."""

    async def run(
        self,
        run_id: str,
        input: str,
        *,
        journal: Journal,
        spec: str | None = None,
        wait: float | None = None,
    ) -> RunResult[Any]: ...

    async def resume(
        self, run_id: str, *, journal: Journal, wait: float | None = None
    ) -> RunResult[Any]: ...


__all__ = ["RunStream", "stream"]


class RunStream:
    """``agent.stream(...)``: the run's events as its drive makes them; ``result`` once the
    iteration ended. Leaving the iteration early does not stop the drive: it finishes first."""

    def __init__(
        self,
        agent: Agent,
        journal: Journal,
        run_id: str,
        input: str | None,
        *,
        after: int | str = 0,
        spec: str | None = None,
        wait: float | None = None,
    ):
        self._start = Cursor.parse(after)
        self._agent, self._journal, self.run_id = agent, journal, run_id
        self._input, self._spec, self._wait = input, spec, wait
        self.result: RunResult[Any] | None = None
        """The drive's result, once the iteration has ended."""

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        store = self._journal.store
        check_run_id(self.run_id)
        # Subscribed before the drive starts, so its first live event is not missed.
        follower = hub_of(store).subscribe(self.run_id)
        if self._input is None:
            drive = self._agent.resume(self.run_id, journal=self._journal, wait=self._wait)
        else:
            drive = self._agent.run(
                self.run_id, self._input, journal=self._journal, spec=self._spec, wait=self._wait
            )
        task = asyncio.get_running_loop().create_task(drive)
        try:
            async for event in events_of(
                store, self.run_id, self._start, live=True, idle=None, drive=task, follower=follower
            ):
                yield event
            self.result = await task
        finally:
            if not task.done():
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    task.cancel()
                    raise


def stream(
    agent: Agent,
    run_id: str,
    input: str | None,
    *,
    journal: Journal,
    after: int | str = 0,
    spec: str | None = None,
    wait: float | None = None,
) -> RunStream:
    """Drive ``run_id`` (start it with ``input``, or resume it if ``input`` is None) and yield
    its events as they happen (``Agent.stream``)."""
    return RunStream(agent, journal, run_id, input, after=after, spec=spec, wait=wait)
