"""A run's place in a tree of runs (``runtime.children``): its parent, and its children with
their status, read from the journal; and what a run's child runs spent (``runtime.limits``).
Read only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runtime import records as R
from runtime.errors import BideError
from runtime.journal.journal import Journal
from runtime.limits import NOTHING, Spent, spent
from runtime.state import RunState

__all__ = ["Family", "Kin", "child_runs", "family", "spent_below"]

CHILDREN_LIMIT = 200
"""Children listed at most (the rest are counted as not shown)."""


@dataclass(frozen=True, slots=True)
class Kin:
    run_id: str
    call_id: str
    status: str


@dataclass(frozen=True, slots=True)
class Family:
    parent: Kin | None
    """The run this one is a child of (its status too), if it is one."""
    children: tuple[Kin, ...]
    more: bool = False
    """More children than ``CHILDREN_LIMIT`` exist."""


async def family(journal: Journal, run_id: str) -> Family:
    """The parent of ``run_id`` (from its start record) and its children (the runs whose start
    record names it as their parent), each with its status (``unreadable`` for a run whose
    records cannot be read: that is for ``show`` of that run to say)."""
    link = await _parent_of(journal, run_id)
    parent = None
    if link is not None:
        parent = Kin(link[0], link[1], await _status(journal, link[0]))
    page = await journal.list_runs(prefix=run_id + "/", limit=CHILDREN_LIMIT + 1)
    children = []
    for row in page.runs[:CHILDREN_LIMIT]:
        link = await _parent_of(journal, row.run_id)
        if link is not None and link[0] == run_id:
            children.append(Kin(row.run_id, link[1], await _status(journal, row.run_id)))
    children.sort(key=lambda k: k.run_id)
    return Family(parent, tuple(children), more=len(page.runs) > CHILDREN_LIMIT)


async def _parent_of(journal: Journal, run_id: str) -> tuple[str, str] | None:
    try:
        start = await journal.store.get(run_id, R.START)
    except BideError:
        return None
    link = (
        start.payload.get("parent")
        if start is not None and isinstance(start.payload, dict)
        else None
    )
    if isinstance(link, Mapping) and isinstance(link.get("run_id"), str):
        return link["run_id"], str(link.get("call_id"))
    return None


async def _status(journal: Journal, run_id: str) -> str:
    try:
        return await journal.status(run_id) or "missing"
    except BideError:
        return "unreadable"


def child_runs(state: RunState) -> list[str]:
    """The child runs the run's calls drove, by the handles its calls journaled (each
    journaled before its child started: ``ChildTool.call``)."""
    found: set[str] = set()
    for cs in state.calls.values():
        for steps in cs.handles.values():
            for record in steps.values():
                value = record.payload.get("handle") if isinstance(record.payload, dict) else None
                if isinstance(value, Mapping) and isinstance(value.get("child_run"), str):
                    found.add(value["child_run"])
    return sorted(found)


async def spent_below(journal: Journal, state: RunState, *, leave: str | None = None) -> Spent:
    """What the run's child runs spent, and theirs, down the tree, read from their records
    (``leave``: that child is not counted). A child run whose output went through the output
    tool does not count those calls, as its own limits do not (``runtime.limits``)."""
    total = NOTHING
    for child in child_runs(state):
        if child == leave:
            continue
        below = await journal.state(child)
        if below is not None:
            total = total + spent(below, output_calls=True)
            total = total + await spent_below(journal, below)
    return total
