"""A run's events: typed, each journaled one with its cursor (``types``); read from the journal
then live, resumable from a cursor (``follow``); what a drive tells its followers (``hub``).

Names are imported on first use: the journal and the loop import ``hub`` and ``types`` while
they load, before ``follow`` (which reads through the journal) can be.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from runtime.events.hub import delta
    from runtime.events.live import follow
    from runtime.events.stream import RunStream, stream
    from runtime.events.told import from_record
    from runtime.events.types import (
        AnswerGiven,
        AttemptMarked,
        CancelRequested,
        ChildEnded,
        ChildStarted,
        Cursor,
        DecisionMade,
        Ended,
        Event,
        Halted,
        Noted,
        Resolved,
        RunStarted,
        Stopped,
        TextDelta,
        ToolCallAsked,
        ToolResult,
        TurnRecorded,
        TurnStarted,
        Waiting,
    )

__all__ = [
    "AnswerGiven",
    "AttemptMarked",
    "CancelRequested",
    "ChildEnded",
    "ChildStarted",
    "Cursor",
    "DecisionMade",
    "Ended",
    "Event",
    "Halted",
    "Noted",
    "Resolved",
    "RunStarted",
    "RunStream",
    "Stopped",
    "TextDelta",
    "ToolCallAsked",
    "ToolResult",
    "TurnRecorded",
    "TurnStarted",
    "Waiting",
    "delta",
    "follow",
    "from_record",
    "stream",
]

_WHERE = {
    "RunStream": "stream",
    "follow": "live",
    "stream": "stream",
    "delta": "hub",
    "from_record": "told",
}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module 'runtime.events' has no attribute {name!r}")
    module = importlib.import_module(f"runtime.events.{_WHERE.get(name, 'types')}")
    return getattr(module, name)
