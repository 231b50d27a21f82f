"""The operator's verbs on a journal: resolve a halted call, decide a gated one, answer a question,
cancel a run. Each judges the run as its records say now, names what it judged (the attempt,
the gate, the question), and is refused if that moved on. ``Journal`` offers them."""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

from runtime import faults, tracing
from runtime import records as R
from runtime.approval import ApprovalPolicy, Decision, canonical_json
from runtime.errors import ConfigError, ConflictError, RunBusy
from runtime.journal.resolution import (
    Decided,
    Resolution,
    already_so,
    call_of,
    check_storable,
    ended,
    judged,
    judged_attempt,
    resolution_payload,
)
from runtime.jsontext import check_signal_name
from runtime.logs import get_logger
from runtime.ownership import is_alive
from runtime.state import RunState
from runtime.store.protocol import Store

__all__ = ["OperatorVerbs"]

log = get_logger("runtime.journal.journal")  # the logger name operators filter verbs by


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


class OperatorVerbs:
    """The verbs of ``Journal``; it supplies ``store`` and ``require``."""

    @property
    def store(self) -> Store:
        raise NotImplementedError

    async def require(self, run_id: str) -> RunState:
        raise NotImplementedError

    async def resolve(
        self,
        run_id: str,
        call_id: str,
        resolution: Resolution,
        *,
        attempt: int | None = None,
        by: str | None = None,
        evidence: str | None = None,
        force: bool = False,
        reconciler: str | None = None,
    ) -> bool:
        """Say what happened to a halted call. True if recorded, False if it was already so.

        ``attempt`` names the attempt the resolution judged (1 for the first). It may be left
        out only while the call has had one attempt; once a call has been attempted again, a
        resolution that does not name its attempt is refused. A resolution is recorded only
        for the call's current attempt, attempted and without a result: one for an attempt the
        call has moved on from is refused (``ConflictError`` naming the current attempt), so a
        verdict on attempt 1 never settles attempt 2, which nobody looked at.

        The first resolution wins; the same one again for the same attempt is a no-op; a
        different one, or one for a call that is not halted, is refused. A call still in flight
        (attempted under the lease of a live owner: it is running now) is refused with
        ``RunBusy``; ``force`` records the resolution anyway, journaled as forced: if it says
        "not executed" while the effect is in fact running, the next attempt may act a second
        time. ``reconciler`` names the reconciler whose conclusion this is
        (``runtime.reconcile``), journaled.
        """
        started_ns = tracing.now_ns()
        state = await self.require(run_id)
        call = call_of(state, call_id)
        k = judged_attempt(state, call, attempt)
        if already_so(state, call, resolution, k):
            return False
        lease = await self.store.lease(run_id)
        driving = lease if is_alive(lease) else None
        if call in state.in_flight(driving) and not force:
            assert driving is not None
            raise RunBusy(
                f"call {call_id} ({call.call.name}) of run {run_id} is still running in "
                f"{driving.owner.describe()}, whose lease lives until "
                f"{_clock(driving.wall_ms(driving.expires_ms))}: its "
                "outcome is not known yet. Resolve it once that process has ended or its lease "
                "has expired (--force records it now, and risks a second effect if you say "
                "not executed and it is executing)",
                lease=driving,
                run_id=run_id,
            )
        payload = resolution_payload(call, resolution, attempt=k, by=by, evidence=evidence)
        if reconciler is not None:
            payload["resolved"]["reconciler"] = reconciler
        if force and driving is not None:
            payload["resolved"]["forced"] = {
                "lease_epoch": driving.epoch,
                "owner": driving.owner.describe(),
            }
        check_storable(payload, "resolution")
        faults.crashpoint("resolve.before_record")
        # The key is attempt k's own, so a resolution of k cannot land once k is settled; the
        # guard refuses it once attempt k + 1 is marked, whatever else the journal holds.
        appended = await self.store.append(
            run_id,
            R.result_key(call_id, k),
            R.RESULT,
            payload,
            unless=R.attempt_key(call_id, k + 1),
        )
        if appended.won and appended.record is not None:
            state.add(appended.record)
            await self._mark_ready(state)
            log.info(
                "call_resolved",
                run_id=run_id,
                call_id=call_id,
                attempt=k,
                outcome=resolution.outcome,
            )
            tracing.resolved(
                run_id=run_id,
                call_id=call_id,
                tool=call.call.name,
                outcome=resolution.outcome,
                by=by,
                start=state.start,
                value=resolution.value,
                started_ns=started_ns,
            )
            return True
        # Someone wrote first (a resolution, the call's own result, the next attempt's marker):
        # judge again by what the journal says now.
        state = await self.require(run_id)
        call = call_of(state, call_id)
        if already_so(state, call, resolution, k):
            return False
        raise ConflictError(
            f"call {call_id!r} of run {run_id!r}: attempt {k + 1} was marked though attempt {k} "
            f"has no result; a resolution of attempt {k} is refused",
            run_id=run_id,
            call_id=call_id,
        )

    async def approve(self, run_id: str, call_id: str, *, by: str, deny: bool = False) -> Decided:
        """Record one person's unsigned decision on a call gated by ``single_approval()``."""
        return await self.decide(run_id, call_id, Decision(by, not deny))

    async def decide(self, run_id: str, call_id: str, decision: Decision) -> Decided:
        """Journal a decision on a gated call; return whether it counts, the tally, and why not.

        Every decision is journaled as seen, valid or not (a forged signature, an unknown
        approver, other arguments, one that came after the gate was decided); only valid ones
        made while the gate was undecided count, each approver's first. The first decision
        decides a 1-of-1 gate, and a denied gate stays denied. An identical resubmission is a
        no-op.
        """
        state = await self.require(run_id)
        call = call_of(state, call_id)
        policy_json = call.plan.get("approval")
        if not policy_json:
            raise ConfigError(f"call {call_id!r} of run {run_id!r} is not gated by an approval")
        policy = ApprovalPolicy.from_json(policy_json)
        if not isinstance(decision.approver, str) or not decision.approver.strip():
            raise ConfigError("a decision needs the approver's name or id")
        if policy.signed and decision.signature is None:
            raise ConfigError(
                f"call {call_id!r} needs signed decisions from its approvers "
                f"({', '.join(sorted(policy.approvers))}): sign with the approver's key"
            )
        payload = {"call_id": call_id, "decision": decision.to_json(), "policy": policy.digest}
        check_storable(payload, "decision")
        fingerprint = hashlib.sha256(canonical_json(payload)).hexdigest()[:24]
        appended = await self.store.append(
            run_id, R.decision_key(call_id, fingerprint), R.DECISION, payload, unless=R.END
        )
        if appended.record is None:
            raise ended(state)
        assert appended.record is not None
        state.add(appended.record)
        now, reason = judged(call, policy, run_id, appended.record.seq)
        if not appended.won:
            reason = "the same decision was recorded already"
        elif reason is None and now.outcome != "pending":
            # The gate is decided: the run is ready to drive (the drive journals the tally).
            await self.store.update_index(run_id, unless=R.END, status="running")
        log.info(
            "decision_recorded",
            run_id=run_id,
            call_id=call_id,
            approver=decision.approver,
            decision="approve" if decision.approve else "deny",
            counts=reason is None,
            reason=reason,
            new=appended.won,
            outcome=now.outcome,
        )
        return Decided(reason is None, now, reason)

    async def answer(
        self,
        run_id: str,
        key: str,
        value: Any,
        *,
        call_id: str | None = None,
        by: str | None = None,
    ) -> bool:
        """Answer a tool's interrupt. True if recorded, False if the same answer was already.

        The value must fit the schema the tool asked for, else nothing is recorded.
        """
        state = await self.require(run_id)
        asked = [
            r
            for c in state.calls.values()
            for k, r in c.interrupts.items()
            if k == key and (call_id is None or c.call.id == call_id)
        ]
        if not asked:
            raise ConfigError(f"run {run_id!r} has no question {key!r} to answer")
        if len(asked) > 1:
            calls = ", ".join(sorted(r.payload["call_id"] for r in asked))
            raise ConfigError(f"question {key!r} was asked by several calls ({calls}): name one")
        question = asked[0].payload
        cid = question["call_id"]
        check_storable({"value": value, "by": by}, "answer")
        import jsonschema  # only an answer is checked against a schema here

        try:
            jsonschema.validate(value, question.get("schema") or {})
        except jsonschema.ValidationError as exc:
            raise ConfigError(
                f"the answer to {key!r} does not fit what was asked: {exc.message}"
            ) from None
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"question {key!r} has an invalid schema: {exc.message}") from exc
        appended = await self.store.append(
            run_id,
            R.answer_key(cid, key),
            R.ANSWER,
            {"call_id": cid, "key": key, "value": value, "by": by},
            unless=R.END,
        )
        if appended.record is None:
            raise ended(state)
        winner = appended.record.payload if appended.record else {}
        if not appended.won and winner.get("value") != value:
            raise ConflictError(
                f"question {key!r} of run {run_id!r} was answered already with a different value",
                run_id=run_id,
                call_id=cid,
            )
        if appended.won:
            state.add(appended.record)
            await self._mark_ready(state)
        return appended.won

    async def signal(
        self,
        run_id: str,
        name: str,
        value: Any = None,
        *,
        signal_id: str | None = None,
        by: str | None = None,
    ) -> bool:
        """Send the run a signal: a named message (``value``, plain JSON) that waits in its
        mailbox until a tool's ``ToolContext.receive(name)`` takes it. True if recorded; False
        if a signal with this ``signal_id`` was already (sending again is safe: one signal).

        Each signal is given to one receive, in the order they were sent. A run waiting for
        this name is made ready to drive (a worker claims it). A different value under an id
        already sent is refused (``ConflictError``), and so is a signal to an ended run.
        """
        check_signal_name(name)
        sid = uuid.uuid4().hex if signal_id is None else check_signal_name(signal_id, "signal id")
        state = await self.require(run_id)
        if state.end is not None:
            raise ended(state)
        check_storable({"value": value, "by": by}, "signal")
        appended = await self.store.append(
            run_id,
            R.signal_key(name, sid),
            R.SIGNAL,
            {"name": name, "signal_id": sid, "value": value, "by": by},
            unless=R.END,
        )
        if appended.record is None:
            raise ended(state)
        if not appended.won and appended.record.payload.get("value") != value:
            raise ConflictError(
                f"signal {sid!r} ({name!r}) of run {run_id!r} was sent already with a different"
                " value",
                run_id=run_id,
            )
        if appended.won:
            log.info("run_signalled", run_id=run_id, signal=name, signal_id=sid, by=by)
            state.add(appended.record)
            if _receiving(state, name):
                # Listed, and on PostgreSQL told to the workers, as ready at once; should the
                # drive that waits still be writing "waiting", the signal wakes it anyway
                # (the claim reads the records: ``store.decide.WAIT_STATUSES``).
                await self.store.update_index(run_id, unless=R.END, status="running")
        return appended.won

    async def _mark_ready(self, state: RunState) -> None:
        """Set the run's index status from its records after a person's input, so that a run
        the input unblocked is listed (and claimed by a worker) as ready to drive."""
        await self.store.update_index(state.run_id, unless=R.END, status=state.status())

    async def cancel(
        self, run_id: str, *, reason: str | None = None, by: str | None = None
    ) -> bool:
        """Ask the run to stop: no new model turn or attempt starts. True if newly requested."""
        state = await self.require(run_id)
        if state.end is not None:
            raise ConfigError(
                f"run {run_id!r} already ended ({state.end.payload.get('status')})", run_id=run_id
            )
        check_storable({"reason": reason, "by": by}, "cancel")
        appended = await self.store.append(
            run_id,
            R.CANCEL,
            R.CANCEL,
            {"reason": reason, "by": by},
            unless=R.END,  # a driver may end the run meanwhile: then there is nothing to cancel
            index={"status": "cancelled"},
        )
        if appended.record is None:
            ended = await self.store.get(run_id, R.END)
            status = ended.payload.get("status") if ended is not None else "ended"
            raise ConfigError(f"run {run_id!r} already ended ({status})", run_id=run_id)
        if appended.won:
            log.info("run_cancel_requested", run_id=run_id, by=by)
        return appended.won


def _receiving(state: RunState, name: str) -> bool:
    """Whether a pending call's latest wait is a receive of ``name`` that was given nothing."""
    for call in state.pending_calls():
        if call.waits:
            n = max(call.waits)
            wait = call.waits[n].payload
            if (
                wait.get("what") == "receive"
                and wait.get("name") == name
                and n not in call.received
            ):
                return True
    return False
