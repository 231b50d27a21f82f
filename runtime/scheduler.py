"""Starting schedules' due slots: every worker does it on each pass (``Worker``).

For each schedule that is not paused, the slots due now (``Schedule.due``) are submitted as
runs whose ids are derived from the schedule and the slot; ``submit`` makes a run only if its
id is new, so two workers that see one slot, or a worker that crashed after submitting and the
one that looks again, start one run. The schedule's cursor moves past a slot only once its run
exists (and moves forward only: ``advance`` keeps the newest), so a worker killed mid-way
leaves the slot to the next one that looks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from runtime.agent import Agent
from runtime.errors import RunBusy, StorageError
from runtime.journal.journal import Journal
from runtime.journal.schedules import Schedule
from runtime.logs import get_logger
from runtime.store.queues import Queues, ScheduleRow

__all__ = ["start_due_slots"]

log = get_logger(__name__)

OpenSpec = Callable[[str], AbstractAsyncContextManager[Agent[Any]]]


async def start_due_slots(
    journal: Journal,
    open_spec: OpenSpec,
    *,
    worker: str,
    failing: dict[str, str] | None = None,
) -> int:
    """Submit the run of every due slot of every schedule; how many runs this call made.

    A schedule whose runs cannot be submitted (its agent spec does not import, say) is logged
    as an error, once while it fails alike (``failing`` remembers it), and the others go on; a
    storage error stops the pass (the caller reports it)."""
    reported = {} if failing is None else failing
    made = 0
    store = journal.store
    if not isinstance(store, Queues):
        return 0
    rows = await store.schedules()
    if not rows:
        return 0
    now = await store.slot_clock_ms()
    for row in rows:
        if row.paused:
            continue
        try:
            made += await _start_slots(journal, store, row, now, open_spec, worker)
        except StorageError:
            raise
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}"
            if reported.get(row.name) != said:
                log.error("schedule_failed", worker=worker, schedule=row.name, error=said)
            reported[row.name] = said
        else:
            if reported.pop(row.name, None) is not None:
                log.info("schedule_restored", worker=worker, schedule=row.name)
    return made


async def _start_slots(
    journal: Journal, store: Queues, row: ScheduleRow, now: int, open_spec: OpenSpec, worker: str
) -> int:
    """Submit the due slots of one schedule and move its cursor; how many runs were made."""
    made = 0
    schedule = Schedule.from_json(row.name, row.spec)
    slots, newest = schedule.due(row.since_ms, row.last_slot_ms, now)
    cursor = newest
    for slot in slots:
        run_id = schedule.run_id(slot)
        try:
            async with open_spec(schedule.agent) as agent:
                result = await agent.submit(
                    run_id,
                    schedule.input,
                    journal=journal,
                    spec=schedule.agent,
                    queue=schedule.queue,
                )
        except RunBusy:
            # Another worker is submitting it now (or died doing so): the cursor stays
            # before this slot, and the next look submits it if it is still not there.
            cursor = slot - 1
            break
        if result.run_id == run_id and result.status.value == "submitted":
            made += 1
        log.info(
            "schedule_slot_started",
            worker=worker,
            schedule=row.name,
            run_id=run_id,
            status=result.status.value,
        )
    skipped = len(slots) == 0 and newest is not None
    if skipped:
        log.info("schedule_slots_skipped", worker=worker, schedule=row.name, up_to=newest)
    if cursor is not None:
        await store.schedule_op(do="advance", name=row.name, slot=cursor)
    return made
