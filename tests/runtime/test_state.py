"""RunState folded from records by hand: each status the records alone tell, and the call views."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import records as R
from runtime.errors import ProtocolError
from runtime.messages import AssistantTurn, ToolCall, Usage
from runtime.ownership import Lease, Owner
from runtime.records import Record
from runtime.state import RunState


def lease(epoch: int) -> Lease:
    return Lease("r", epoch, Owner.here(), 0, 60_000, released=False, live=True)


class Run:
    """Records of one run, numbered in commit order as a store would."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, key: str, kind: str, payload: Any) -> Record:
        record = Record(len(self.records) + 1, "r", key, kind, payload, 0)
        self.records.append(record)
        return record

    def start(self) -> Run:
        self.add(R.START, R.START, {"input": "refund order 7"})
        return self

    def turn(
        self, *calls: str, plan: dict[str, Any] | None = None, usage: Usage | None = None
    ) -> Run:
        n = sum(r.kind == R.TURN for r in self.records) + 1
        turn = AssistantTurn(
            text=None if calls else "done",
            tool_calls=tuple(ToolCall(c, "refund", {"order": 7}) for c in calls),
            usage=usage or Usage(),
            finish_reason="tool_calls" if calls else "stop",
        )
        payload = {"n": n, "turn": turn.to_json(), "plan": plan or {}}
        self.add(R.turn_key(n), R.TURN, payload)
        return self

    def attempt(self, call: str, k: int = 1, *, epoch: int = 1) -> Run:
        payload = {"call_id": call, "attempt": k, "epoch": epoch}
        self.add(R.attempt_key(call, k), R.ATTEMPT, payload)
        return self

    def result(self, call: str, k: int = 1, **outcome: Any) -> Run:
        payload = {"call_id": call, "attempt": k, "tool": "refund", **outcome}
        self.add(R.result_key(call, k), R.RESULT, payload)
        return self

    def state(self) -> RunState:
        return RunState.fold("r", self.records)


def test_a_started_run_with_no_turn_is_running_and_keeps_its_input() -> None:
    state = Run().start().state()
    assert state.status() == "running"
    assert state.input == "refund order 7"
    assert state.pending_calls() == []
    assert RunState("r").input is None


def test_a_call_not_yet_attempted_is_pending_and_the_run_running() -> None:
    state = Run().start().turn("c1").state()
    assert [c.call.id for c in state.pending_calls()] == ["c1"]
    assert state.status() == "running"
    assert state.halted_calls() == []


def test_an_attempt_without_a_result_halts_the_run_on_that_call() -> None:
    state = Run().start().turn("c1").attempt("c1").state()
    assert state.status() == "halted"
    assert [c.call.id for c in state.halted_calls()] == ["c1"]
    assert [c.call.id for c in state.unresolved_calls()] == ["c1"]
    (call,) = state.halted_calls()
    assert call.unknown_outcome and call.marker is not None and call.result is None


def test_a_result_settles_the_call_and_is_what_the_model_sees() -> None:
    run = Run().start().turn("c1", "c2").attempt("c1").result("c1", outcome="value", value=30)
    run.result("c2", outcome="error", error={"type": "tool_failed", "message": "no"})
    state = run.state()
    assert state.status() == "running"
    assert state.pending_calls() == []
    assert state.calls["c1"].message_content() == (30, False)
    assert state.calls["c2"].message_content() == ({"type": "tool_failed", "message": "no"}, True)


def test_the_content_of_a_call_without_a_result_is_a_protocol_error() -> None:
    state = Run().start().turn("c1").state()
    with pytest.raises(ProtocolError, match="c1 has no result yet"):
        state.calls["c1"].message_content()


def test_a_call_resolved_not_executed_moves_to_its_next_attempt() -> None:
    run = Run().start().turn("c1").attempt("c1")
    run.result("c1", outcome="not_executed", resolved=True)
    state = run.state()
    call = state.calls["c1"]
    assert (call.attempt, call.result, call.marker) == (2, None, None)
    assert call.last_resolution is not None and call.last_resolution.key == "result/c1/1"
    assert state.status() == "running"


def test_a_late_result_after_not_executed_is_the_calls_result() -> None:
    run = Run().start().turn("c1").attempt("c1")
    run.result("c1", outcome="not_executed", resolved=True)
    late = run.add("late/c1/1", R.LATE, {"call_id": "c1", "attempt": 1, "outcome": "value"})
    call = run.state().calls["c1"]
    assert (call.attempt, call.result) == (1, late)


def test_a_gated_call_waits_for_its_tally_and_runs_once_there_is_one() -> None:
    run = Run().start().turn("c1", plan={"c1": {"safety": "side_effect", "approval": {"need": 1}}})
    assert run.state().status() == "waiting"
    assert [c.call.id for c in run.state().waiting_calls()] == ["c1"]
    run.add("tally/c1/p", R.TALLY, {"call_id": "c1", "policy": "p", "outcome": "approved"})
    assert run.state().status() == "running"
    assert run.state().waiting_calls() == []


def test_an_open_question_waits_until_its_answer_is_journaled() -> None:
    run = Run().start().turn("c1")
    run.add("interrupt/c1/size", R.INTERRUPT, {"call_id": "c1", "key": "size", "prompt": "?"})
    assert run.state().status() == "waiting"
    run.add("answer/c1/size", R.ANSWER, {"call_id": "c1", "key": "size", "value": "L"})
    assert run.state().status() == "running"


def test_a_cancel_request_and_an_end_are_read_in_that_order() -> None:
    run = Run().start().turn("c1").attempt("c1")
    run.add(R.CANCEL, R.CANCEL, {"by": "ops"})
    assert run.state().status() == "cancelled"
    run.add(R.END, R.END, {"status": "cancelled", "output": None, "error": None})
    assert run.state().status() == "cancelled"
    assert [c.call.id for c in run.state().unresolved_calls()] == ["c1"]  # ending says nothing
    ended = Run().start().turn()
    ended.add(R.END, R.END, {"status": "completed", "output": "done", "error": None})
    assert ended.state().status() == "completed"


def test_a_journaled_stop_makes_the_run_orphaned_until_a_new_turn() -> None:
    run = Run().start().turn()
    run.add(R.stop_key(1, "max_turns"), R.STOP, {"reason": "max_turns", "turns": 1})
    state = run.state()
    assert state.status() == "orphaned"
    assert state.stop is not None and state.stop.payload["reason"] == "max_turns"
    run.turn()
    assert run.state().stop is None
    assert run.state().status() == "running"


def test_turns_usage_adds_up_and_a_record_is_folded_once() -> None:
    run = Run().start().turn("c1", usage=Usage(10, 2)).result("c1", outcome="value", value=1)
    run.turn(usage=Usage(5, 1))
    state = RunState.fold("r", [*run.records, *run.records])
    assert state.usage == Usage(15, 3)
    assert len(state.turns) == 2 and len(state.records) == len(run.records)


def test_an_unknown_record_kind_is_kept_and_changes_nothing() -> None:
    run = Run().start()
    run.add("note/1", "note", {"text": "from a newer bide"})
    state = run.state()
    assert state.status() == "running"
    assert [r.kind for r in state.records] == [R.START, "note"]


def test_a_turn_out_of_order_or_a_record_for_an_unasked_call_is_a_protocol_error() -> None:
    run = Run().start()
    run.add(R.turn_key(2), R.TURN, {"n": 2, "turn": AssistantTurn(text="x").to_json()})
    with pytest.raises(ProtocolError, match="turn 2 recorded after turn 0"):
        run.state()
    stray = Run().start().turn("c1").attempt("c9")
    with pytest.raises(ProtocolError, match="names call 'c9', which no recorded turn asked for"):
        stray.state()


def test_two_attempts_with_results_and_records_after_the_end_are_anomalies() -> None:
    run = Run().start().turn("c1").attempt("c1").result("c1", outcome="value", value=1)
    run.attempt("c1", 2).result("c1", 2, outcome="value", value=1)
    run.add(R.END, R.END, {"status": "completed"})
    run.add("late/c1/2", R.LATE, {"call_id": "c1", "attempt": 2, "outcome": "value"})
    assert run.state().anomalies() == [
        "may have acted twice: call c1 (refund) has 2 attempts with results (1, 2)"
    ]
    run.turn()
    assert run.state().anomalies()[-1] == f"records after the end: turn/2 (seq {len(run.records)})"


def test_a_journal_this_bide_writes_has_no_anomalies() -> None:
    run = Run().start().turn("c1").attempt("c1").result("c1", outcome="value", value=1).turn()
    run.add(R.END, R.END, {"status": "completed"})
    assert run.state().anomalies() == []


def test_with_a_live_owner_a_run_is_running_even_with_a_side_effect_in_flight() -> None:
    state = Run().start().turn("c1").attempt("c1", epoch=3).state()
    assert state.status() == "halted"
    assert state.live_status(lease(3)) == "running"
    assert [c.call.id for c in state.in_flight(lease(3))] == ["c1"]
    assert state.in_flight(lease(4)) == []  # attempted under an owner that is gone
    assert state.in_flight(None) == []


def test_without_a_live_owner_a_running_run_is_orphaned_or_submitted() -> None:
    state = Run().start().turn("c1").state()
    assert state.live_status(None) == "orphaned"
    assert state.live_status(None, submitted=True) == "submitted"
    assert Run().start().turn("c1").attempt("c1").state().live_status(None) == "halted"


def test_an_ended_or_cancelled_run_keeps_its_status_whoever_holds_the_lease() -> None:
    ended = Run().start().turn()
    ended.add(R.END, R.END, {"status": "failed"})
    assert ended.state().live_status(lease(1)) == "failed"
    cancelled = Run().start().turn("c1")
    cancelled.add(R.CANCEL, R.CANCEL, {})
    assert cancelled.state().live_status(lease(1)) == "cancelled"
