"""What the queue tests prove from the journal, not from timing: a key's runs never overlap."""

from __future__ import annotations

from collections import defaultdict

from runtime import Journal
from runtime.records import END


async def key_overlaps(journal: Journal, queue: str, limit: int) -> list[str]:
    """Each time a run of a key started (its claim, at the journal's highest seq then) while
    ``limit`` runs of that key had started and not ended (their end records after that seq),
    one line saying so. Empty: the per-key limit held, by the journal's commit order."""
    store = journal.store
    rows = await store._queue_read(  # type: ignore[attr-defined]
        "SELECT run_id, ckey, started_seq FROM bide_queue_runs WHERE queue = :queue",
        {"queue": queue},
    )
    by_key: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for run_id, key, started in rows:
        assert started is not None, f"{run_id} never started"
        end = await store.get(run_id, END)
        assert end is not None, f"{run_id} never ended"
        by_key[key].append((started, end.seq, run_id))
    problems = []
    for spans in by_key.values():
        for started, _end, run_id in spans:
            active = [r for s, e, r in spans if r != run_id and s <= started < e]
            if len(active) >= limit:
                problems.append(f"{run_id} started at seq {started} while {active} were active")
    return problems
