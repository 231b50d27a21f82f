"""What a person asks the console to do, read from a form: previewed first, then journaled.

Each action calls the same ``Journal`` method as its CLI verb, so it is refused for the same
reasons (an in-flight or finished call cannot be resolved, a conflicting resolution or answer is
refused, a denial is final, a signed gate needs a signed decision).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.approval import ApprovalPolicy, Decision, verify
from runtime.errors import ConfigError
from runtime.journal import Journal, Resolution
from runtime.journal.resolution import resolution_payload
from runtime.jsontext import TooDeep, check_signal_name, parse_json
from runtime.state import RunState

__all__ = [
    "DECISION_FORMAT",
    "Action",
    "AnswerAction",
    "CancelAction",
    "DecideAction",
    "Preview",
    "ResolveAction",
    "parse_action",
]

DECISION_FORMAT = "bide/decision/v1"
"""The ``format`` of a decision file written by ``approve --key FILE --out FILE``."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What the confirmation shows: a sentence, the record to be journaled, and any warning."""

    summary: str
    record_kind: str
    payload: Mapping[str, Any]
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class ResolveAction:
    run_id: str
    call_id: str
    resolution: Resolution
    by: str | None
    evidence: str | None
    attempt: int | None = None
    """The attempt the page showed the operator; the resolution judges that one only."""

    def preview(self, state: RunState) -> Preview:
        call = state.calls.get(self.call_id)
        if call is None:
            raise ConfigError(f"run {self.run_id!r} has no call {self.call_id!r}")
        k = self.attempt if self.attempt is not None else call.attempt
        said = {"value": "succeeded", "error": "failed", "not_executed": "not executed"}
        payload = resolution_payload(
            call, self.resolution, attempt=k, by=self.by, evidence=self.evidence
        )
        warning = None
        if k != call.attempt:
            warning = (
                f"this call is on attempt {call.attempt} now, not attempt {k}: a resolution of "
                f"attempt {k} will be refused unless the journal says so already"
            )
        return Preview(
            f"resolve attempt {k} of call {self.call_id} ({call.call.name}) of run "
            f"{self.run_id} as {said[self.resolution.outcome]}",
            "result",
            payload,
            warning,
        )

    async def apply(self, journal: Journal) -> str:
        new = await journal.resolve(
            self.run_id,
            self.call_id,
            self.resolution,
            attempt=self.attempt,
            by=self.by,
            evidence=self.evidence,
        )
        return "resolved" if new else "already resolved so"


@dataclass(frozen=True, slots=True)
class DecideAction:
    run_id: str
    call_id: str
    decision: Decision

    def preview(self, state: RunState) -> Preview:
        call = state.calls.get(self.call_id)
        if call is None:
            raise ConfigError(f"run {self.run_id!r} has no call {self.call_id!r}")
        policy_json = call.plan.get("approval")
        if not policy_json:
            raise ConfigError(f"call {self.call_id!r} of run {self.run_id!r} is not gated")
        policy = ApprovalPolicy.from_json(policy_json)
        warning = None
        if policy.signed:
            valid = verify(
                policy,
                self.decision,
                run_id=self.run_id,
                call_id=self.call_id,
                tool=call.call.name,
                arguments=call.call.arguments,
            )
            if not valid:
                warning = (
                    "this signature does not verify against the approver's key for this call: "
                    "it will be journaled as seen and not counted"
                )
        verb = "approve" if self.decision.approve else "deny (final)"
        return Preview(
            f"{verb} call {self.call_id} ({call.call.name}) of run {self.run_id} as "
            f"{self.decision.approver}",
            "decision",
            {
                "call_id": self.call_id,
                "decision": self.decision.to_json(),
                "policy": policy.digest,
            },
            warning,
        )

    async def apply(self, journal: Journal) -> str:
        counted, now, reason = await journal.decide(self.run_id, self.call_id, self.decision)
        said = "counted" if counted else f"recorded as seen, not counted: {reason}"
        return f"decision {said}; gate {now.outcome}, {len(now.approvals)} of {now.need}"


@dataclass(frozen=True, slots=True)
class AnswerAction:
    run_id: str
    key: str
    value: Any
    call_id: str | None
    by: str | None

    def preview(self, state: RunState) -> Preview:
        asked = [
            c.call.id
            for c in state.calls.values()
            if self.key in c.interrupts and (self.call_id is None or c.call.id == self.call_id)
        ]
        if len(asked) != 1:
            raise ConfigError(f"run {self.run_id!r} has no single question {self.key!r}")
        return Preview(
            f"answer {self.key} of call {asked[0]} in run {self.run_id}",
            "answer",
            {"call_id": asked[0], "key": self.key, "value": self.value, "by": self.by},
        )

    async def apply(self, journal: Journal) -> str:
        new = await journal.answer(
            self.run_id, self.key, self.value, call_id=self.call_id, by=self.by
        )
        return "answer recorded" if new else "already answered with that value"


@dataclass(frozen=True, slots=True)
class SignalAction:
    run_id: str
    name: str
    value: Any
    signal_id: str | None
    by: str | None

    def preview(self, state: RunState) -> Preview:
        check_signal_name(self.name)
        if self.signal_id is not None:
            check_signal_name(self.signal_id, "signal id")
        if state.end is not None:
            raise ConfigError(f"run {self.run_id!r} has ended; nothing more is recorded for it")
        return Preview(
            f"send signal {self.name} to run {self.run_id}",
            "signal",
            {"name": self.name, "value": self.value, "by": self.by},
        )

    async def apply(self, journal: Journal) -> str:
        new = await journal.signal(
            self.run_id, self.name, self.value, signal_id=self.signal_id, by=self.by
        )
        return f"signal {self.name} sent" if new else "this signal was already sent"


@dataclass(frozen=True, slots=True)
class CancelAction:
    run_id: str
    reason: str | None
    by: str | None

    def preview(self, state: RunState) -> Preview:
        warning = None
        if state.halted_calls():
            calls = ", ".join(c.call.id for c in state.halted_calls())
            warning = (
                f"cancelling does not say whether the halted call(s) {calls} acted: "
                "resolve them too"
            )
        return Preview(
            f"cancel run {self.run_id}", "cancel", {"reason": self.reason, "by": self.by}, warning
        )

    async def apply(self, journal: Journal) -> str:
        new = await journal.cancel(self.run_id, reason=self.reason, by=self.by)
        return "cancel requested" if new else "cancel was already requested"


Action = ResolveAction | DecideAction | AnswerAction | SignalAction | CancelAction


def parse_action(run_id: str, form: Mapping[str, str], *, by: str | None) -> Action:
    """The action a submitted form asks for; ``ConfigError`` says what is wrong with it."""
    what = form.get("action", "")
    text = {k: v.strip() for k, v in form.items()}
    if what == "resolve":
        return ResolveAction(
            run_id,
            _needed(text, "call_id"),
            _resolution(form),
            by,
            text.get("evidence") or None,
            _attempt(text.get("attempt")),
        )
    if what in ("approve", "deny"):
        if not by:
            raise ConfigError("the console has no operator name: start it with --operator NAME")
        return DecideAction(run_id, _needed(text, "call_id"), Decision(by, what == "approve"))
    if what == "signed":
        return DecideAction(
            run_id, _needed(text, "call_id"), signed_decision(run_id, text, form.get("decision"))
        )
    if what == "answer":
        return AnswerAction(
            run_id,
            _needed(text, "key"),
            _json(form.get("value", ""), "the answer"),
            text.get("call_id") or None,
            by,
        )
    if what == "signal":
        return SignalAction(
            run_id,
            _needed(text, "name"),
            _json(form.get("value", ""), "the value"),
            text.get("signal_id") or None,
            by,
        )
    if what == "cancel":
        return CancelAction(run_id, text.get("reason") or None, by)
    raise ConfigError(f"unknown action {what!r}")


def signed_decision(run_id: str, text: Mapping[str, str], document: str | None) -> Decision:
    """A decision from the JSON document ``approve --key FILE --out FILE`` wrote, checked to be
    for this run and this call (its signature is checked when the gate is tallied)."""
    data = _json(document or "", "the signed decision")
    if not isinstance(data, Mapping) or data.get("format") != DECISION_FORMAT:
        raise ConfigError(f"a signed decision is a JSON object with format {DECISION_FORMAT!r}")
    call_id = text.get("call_id")
    if data.get("run_id") != run_id or data.get("call_id") != call_id:
        raise ConfigError(
            f"this decision is for run {data.get('run_id')!r} call {data.get('call_id')!r}, "
            f"not run {run_id!r} call {call_id!r}"
        )
    inner = data.get("decision")
    if not isinstance(inner, Mapping) or not inner.get("signature"):
        raise ConfigError("the document holds no signed decision")
    try:
        return Decision.from_json(inner)
    except ValueError as exc:
        raise ConfigError(f"the decision's signature is not base64: {exc}") from None


def _resolution(form: Mapping[str, str]) -> Resolution:
    outcome = form.get("outcome")
    if outcome == "succeeded":
        return Resolution.succeeded(_json(form.get("value", ""), "the result"))
    if outcome == "failed":
        return Resolution.failed(form.get("error", "").strip())
    if outcome == "not_executed":
        return Resolution.not_executed()
    raise ConfigError("say what happened: succeeded, failed or not executed")


def _attempt(text: str | None) -> int | None:
    """The attempt a resolve form names (its page's); None when a hand-made form names none,
    which ``Journal.resolve`` accepts only while the call has had one attempt."""
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"the form's attempt is a positive integer, not {text!r}")
    return int(text)


def _json(text: str, what: str) -> Any:
    try:
        return parse_json(text)
    except TooDeep as exc:
        raise ConfigError(f"{what}: {exc}, more than a journal keeps") from None
    except ValueError:
        raise ConfigError(
            f'{what} must be JSON (for a text, quote it: "done"), not {text!r}'
        ) from None


def _needed(form: Mapping[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise ConfigError(f"the form has no {name}")
    return value
