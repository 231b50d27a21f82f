"""Reconcilers: a side effect that can look its own effect up settles its halts by itself.

    async def find_charge(attempt: Attempt) -> Found | Absent | Unknown:
        charge = await provider.find(idempotency_key=attempt.idempotency_key)
        if charge is None:
            return Absent(f"no charge with key {attempt.idempotency_key}")
        return Found({"charge_id": charge.id}, f"charge {charge.id} has the call's key")

    @tool(reconcile=find_charge)
    async def charge_card(...): ...

A halted call (attempted, no result) is looked up and the conclusion journaled as its
resolution, naming the reconciler and its evidence, by the same first-wins rule as a person's
(a person's earlier resolution stands). *Found* settles at once. *Absent* becomes "not executed"
only when the tool declares a settle time (``@tool(reconcile=..., settle=...)``), the attempt's
owner no longer holds the run's lease, **and** the settle time has passed since that lease
ended, on the journal's clock (``Store.clock_ms``): the owner sends nothing past its lease
(``Holding.before_send``), so the effect left before the lease ended, and the settle time is
how long the provider may take to apply it. Before that, concluding "it did not happen" would
let the next attempt act twice. With no declared settle time, *absent* leaves the halt for a
person. *Unknown*, and a reconciler that raises or outlasts its timeout, leave the call halted,
tried again later with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runtime import records as R
from runtime.drive import Drive
from runtime.errors import ConflictError, RunBusy
from runtime.findings import (
    BACKOFF,
    RECONCILE_TIMEOUT,
    Absent,
    Attempt,
    Found,
    Reconciler,
    Unknown,
    Verdict,
    reconciler_of,
    settle_seconds,
    settles_at_ms,
)
from runtime.journal.journal import Journal
from runtime.journal.resolution import Resolution, resolution_payload
from runtime.logs import get_logger
from runtime.ownership import Owner, is_alive
from runtime.redact import clean
from runtime.state import CallState, RunState
from runtime.tools import Tool, ToolContext, idempotency_key_for

__all__ = [
    "BACKOFF",
    "RECONCILE_TIMEOUT",
    "Absent",
    "Attempt",
    "Found",
    "Reconciler",
    "Unknown",
    "Verdict",
    "consult",
    "due_ms",
    "in_drive",
    "settle_run",
    "settle_seconds",
    "settles_at_ms",
]

log = get_logger(__name__)


async def consult(
    tool: Tool,
    call: CallState,
    run_id: str,
    *,
    key_scheme: int,
    now_ms: int,
    lease_end_ms: int | None,
) -> Verdict | None:
    """Ask the tool's reconciler about ``call``'s current attempt; None if it has none.

    ``now_ms`` is the journal's clock (``Store.clock_ms``); ``lease_end_ms``, on the same clock,
    a time no earlier than the end of the lease of the attempt's owner, or None while that owner
    may still hold it: only with it may *absent* settle the call.
    """
    reconcile = reconciler_of(tool)
    marker = call.marker
    if reconcile is None or marker is None:
        return None
    name = getattr(reconcile, "__name__", type(reconcile).__name__)
    key = idempotency_key_for(run_id, call.call.id, scheme=key_scheme)
    attempt = Attempt(
        run_id=run_id,
        call_id=call.call.id,
        tool=call.call.name,
        arguments=call.call.arguments,
        idempotency_key=key,
        attempted_at_ms=marker.created_ms,
        attempt=call.attempt,
        context=ToolContext(
            run_id=run_id,
            call_id=call.call.id,
            tool_name=call.call.name,
            safety=tool.spec.safety,
            idempotency_key=key,
        ),
    )
    tries = len(call.reconciles.get(call.attempt, ()))
    said = await _ask(reconcile, attempt, name)
    later = now_ms + int(BACKOFF[min(tries, len(BACKOFF) - 1)] * 1000)
    verdict = _judge(name, said, settle_seconds(tool), now_ms, later, lease_end_ms)
    if verdict.next_try_ms is None:
        return verdict
    return replace(verdict, retry_in_ms=verdict.next_try_ms - now_ms)


def _judge(
    name: str, said: object, settle: float | None, now_ms: int, later: int, lease_end_ms: int | None
) -> Verdict:
    """What a reconciler's answer concludes (see ``consult``)."""
    if isinstance(said, Found):
        return Verdict(name, "found", clean(str(said.evidence)), "value", said.value)
    if isinstance(said, Absent):
        evidence = clean(str(said.evidence))
        if settle is None:
            why = (
                "the tool declares no settle time (settle=): an absent cannot tell a provider "
                "that has not acted yet from one that never will; a person must say"
            )
            return Verdict(name, "absent", evidence, waiting=why, next_try_ms=later)
        if lease_end_ms is None:
            why = "the attempt's owner still holds the run: it may be running it"
            return Verdict(name, "absent", evidence, waiting=why, next_try_ms=later)
        settles_at = settles_at_ms(lease_end_ms, settle)
        if now_ms >= settles_at:
            return Verdict(name, "absent", evidence, "not_executed")
        left = (settles_at - now_ms) / 1000
        why = f"it may still be in flight until its settle time ({left:.0f} s from now)"
        return Verdict(name, "absent", evidence, waiting=why, next_try_ms=max(later, settles_at))
    if isinstance(said, Unknown):
        return Verdict(name, "unknown", clean(str(said.why)), next_try_ms=later)
    return Verdict(
        name,
        "unknown",
        f"returned {type(said).__name__}, not Found, Absent or Unknown",
        next_try_ms=later,
    )


async def _ask(reconcile: Reconciler, attempt: Attempt, name: str) -> object:
    """The reconciler's answer (user code: checked by the caller, whatever it claims to return);
    a raise or an answer later than ``RECONCILE_TIMEOUT`` is an Unknown."""
    try:
        async with asyncio.timeout(RECONCILE_TIMEOUT):
            return await reconcile(attempt)
    except TimeoutError:
        return Unknown(f"the lookup took more than {RECONCILE_TIMEOUT:g} s")
    except Exception as exc:
        log.warning("reconciler_failed", call_id=attempt.call_id, reconciler=name, error=str(exc))
        return Unknown(f"raised {type(exc).__name__}: {exc}")


def resolution_of(verdict: Verdict) -> dict[str, Any]:
    """The fields a settling verdict gives its resolution record."""
    fields: dict[str, Any] = {"outcome": verdict.outcome}
    if verdict.outcome == "value":
        fields["value"] = verdict.value
    return fields


def try_key(call: CallState) -> str:
    """The key of the next inconclusive try's record."""
    return R.reconcile_key(
        call.call.id, call.attempt, len(call.reconciles.get(call.attempt, ())) + 1
    )


async def in_drive(drive: Drive, cs: CallState, *, owner_gone: bool) -> Verdict | None:
    """Inside a drive: ask the tool's reconciler about the halted attempt; journal what it
    concluded (a resolution, first-wins) or the inconclusive try, through the drive's append
    (under its lease). None if the tool has no reconciler."""
    tool = drive.agent.tools.get(cs.call.name)
    if tool is None or reconciler_of(tool) is None:
        return None
    judged = cs.attempt  # the verdict is about this attempt, whatever happens meanwhile
    # The attempt of an owner this drive took the lease from ended no later than this drive's
    # lease began (that lease had expired or been released, or its process was gone).
    lease = drive.holding.lease
    lease_end = lease.acquired_ms if owner_gone and lease is not None else None
    verdict = await consult(
        tool,
        cs,
        drive.run_id,
        key_scheme=drive.key_scheme,
        now_ms=await drive.holding.store.clock_ms(),
        lease_end_ms=lease_end,
    )
    if verdict is None:
        return None
    if verdict.outcome is None:
        await drive.append(try_key(cs), R.RECONCILE, verdict.to_json(cs), after_end=True)
        log.info("reconcile_tried", call_id=cs.call.id, said=verdict.brief())
        return verdict
    resolution = (
        Resolution.succeeded(verdict.value)
        if verdict.outcome == "value"
        else Resolution.not_executed()
    )
    payload = resolution_payload(
        cs, resolution, attempt=judged, by=verdict.by, evidence=verdict.detail
    )
    payload["resolved"]["reconciler"] = verdict.reconciler
    appended = await drive.append(
        R.result_key(cs.call.id, judged),
        R.RESULT,
        payload,
        unless=R.attempt_key(cs.call.id, judged + 1),
    )
    log.info(
        "call_reconciled",
        call_id=cs.call.id,
        said=verdict.said,
        reconciler=verdict.reconciler,
        won=appended.won,
    )
    return verdict


async def settle_run(
    journal: Journal, tools: Mapping[str, Tool], run_id: str, *, now: bool = False
) -> list[tuple[CallState, Verdict]]:
    """Reconcile the run's unresolved calls whose tools declare a reconciler, outside a drive
    (a worker, ``python -m runtime reconcile``); each verdict journaled, as a resolution when it
    settles the call. A run that a live owner drives is left to that drive. Unless ``now``, a
    call whose last try set a later next try is skipped."""
    state = await journal.require(run_id)
    lease = await journal.lease(run_id)
    if is_alive(lease):
        return []
    if lease is not None and lease.live:
        # Its owner is a gone process of this machine, and its lease has not run out: take the
        # lease over and give it back, so that its end is journaled (now) for the settle time
        # to count from, and nothing of the gone owner's can land after it.
        try:
            taken = await journal.store.acquire(
                run_id, Owner.here(), ttl=journal.lease_ttl, take_over=lease.epoch
            )
        except RunBusy:  # another process took it first: that drive settles its calls
            return []
        await journal.store.release(taken)
        lease = await journal.lease(run_id)
        if is_alive(lease):
            return []
    scheme = int((state.start or {}).get("key_scheme") or 1)
    clock = await journal.store.clock_ms()
    # No owner holds the run: every attempt's lease has ended, no later than this one's end.
    lease_end = lease.end_ms if lease is not None else None
    found: list[tuple[CallState, Verdict]] = []
    for call in state.unresolved_calls():
        tool = tools.get(call.call.name)
        if tool is None or reconciler_of(tool) is None:
            continue
        if not now and not _due(call, clock):
            continue
        verdict = await consult(
            tool, call, run_id, key_scheme=scheme, now_ms=clock, lease_end_ms=lease_end
        )
        if verdict is None:
            continue
        if verdict.outcome is None:
            await journal.store.append(run_id, try_key(call), R.RECONCILE, verdict.to_json(call))
        else:
            resolution = (
                Resolution.succeeded(verdict.value)
                if verdict.outcome == "value"
                else Resolution.not_executed()
            )
            try:
                await journal.resolve(
                    run_id,
                    call.call.id,
                    resolution,
                    attempt=call.attempt,  # the attempt it looked up, read before it did
                    by=verdict.by,
                    evidence=verdict.detail,
                    reconciler=verdict.reconciler,
                )
            except (ConflictError, RunBusy) as exc:  # a person (or a drive) was first
                log.info("reconcile_overtaken", run_id=run_id, call_id=call.call.id, why=str(exc))
                continue
        log.info("reconcile_tried", run_id=run_id, call_id=call.call.id, said=verdict.brief())
        found.append((call, verdict))
    return found


def _due(call: CallState, clock: int) -> bool:
    """Whether ``call``'s next try is due at ``clock`` (the journal's clock), as its last try
    journaled it. A next try further ahead than that try's own wait was set on another clock
    (another boot's, or an older bide's wall clock): it is due now."""
    last = call.last_reconcile
    if last is None:
        return True
    due, wait = last.payload.get("next_try_ms"), last.payload.get("retry_in_ms")
    if not isinstance(due, int) or not isinstance(wait, int) or due <= clock:
        return True
    return due - clock > wait


def due_ms(state: RunState) -> int | None:
    """When the earliest of the run's unresolved calls is due for its next try, as the last
    inconclusive try journaled it; None if no call was tried yet."""
    due = [
        r.payload.get("next_try_ms")
        for call in state.unresolved_calls()
        if (r := call.last_reconcile) is not None
    ]
    found = [d for d in due if isinstance(d, int) and not isinstance(d, bool)]
    return min(found) if found else None


def next_try_ms(verdicts: list[tuple[CallState, Verdict]]) -> int | None:
    """When the earliest inconclusive call of these verdicts is due again."""
    due = [v.next_try_ms for _, v in verdicts if v.outcome is None and v.next_try_ms is not None]
    return min(due) if due else None
