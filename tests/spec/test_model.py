"""The protocol model (``spec/``): bide's protocol breaks no property within the default bounds,
each known bug yields a readable trail, and the model assumes the code's rules, not copies."""

from __future__ import annotations

import inspect

import pytest

from runtime import ownership
from runtime.functions import tool
from runtime.journal import Journal
from runtime.reconcile import settle_seconds, settles_at_ms
from runtime.store.leases import judge
from runtime.store.ops import LeaseOp
from spec import protocol
from spec.check import check
from spec.models import DEEP, MAIN, MUTANTS, Mutant
from spec.protocol import Bounds, Lease, Model, Rules


@pytest.mark.parametrize("model", MAIN, ids=[m.name for m in MAIN])
def test_bide_as_its_stores_decide_leases_breaks_nothing(model: Model) -> None:
    """Also the control of the settle-time mutant: its settle (2) covers the delay (2)."""
    report = check(model)
    assert report.passed, report.summary()
    assert report.states > 1000 and report.depth > 20  # it explored, not stopped at once


@pytest.mark.slow
@pytest.mark.parametrize("model", DEEP, ids=[m.name for m in DEEP])
def test_bide_at_deeper_bounds_breaks_nothing(model: Model) -> None:
    report = check(model)
    assert report.passed, report.summary()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.model.name for m in MUTANTS])
def test_each_known_bug_yields_a_readable_trail(mutant: Mutant) -> None:
    report = check(mutant.model, (mutant.violates,))
    assert report.violation == mutant.violates
    schedule = report.schedule().splitlines()
    assert len(schedule) == len(report.trail) > 3
    assert schedule[0] == "  1. worker A asks for the lease [clock 0]"
    assert all(line[:5].strip().rstrip(".").isdigit() for line in schedule)
    assert not any("(" in line.split(".", 1)[1][:2] for line in schedule)  # words, not tuples
    assert mutant.violates in report.summary()


def test_the_first_trail_is_a_shortest_one() -> None:
    """Breadth first: no shorter schedule reaches the violation."""
    mutant = MUTANTS[-1]
    report = check(mutant.model, (mutant.violates,))
    assert len(report.trail) == report.depth


# --- the model assumes the code's rules -------------------------------------------------------


def test_lease_decisions_are_the_sqlite_stores_own() -> None:
    """The model does not restate the lease rules: it calls the stores' ``judge``."""
    assert protocol.judge is judge  # type: ignore[attr-defined]
    granted, lease = protocol.lease_decision("acquire", None, None, "A1", 3)
    assert granted and lease == Lease(1, "A1", 3, False)
    # A live lease is refused to another owner; an expired one is taken over with a new epoch.
    assert not protocol.lease_decision("acquire", Lease(1, "A1", 1, False), None, "B1", 3)[0]
    taken = protocol.lease_decision("acquire", Lease(1, "A1", 0, False), None, "B1", 3)
    assert taken == (True, Lease(2, "B1", 3, False))
    # A renewal of an epoch that moved on is refused (fencing).
    assert not protocol.lease_decision("renew", Lease(2, "B1", 3, False), 1, "A1", 3)[0]


def test_the_stores_never_renew_an_expired_lease_that_nobody_took_over() -> None:
    """What the model found, and the revival mutant keeps finding: the store's own rule
    refuses it (the holder must acquire anew, with a new epoch)."""
    leases = {"r": (1, protocol._owner("A1"), "h", 0, 10, False)}
    granted, row, _ = judge(LeaseOp("renew", "r", epoch=1, ttl_ms=5), leases, set(), 20)
    assert not granted and row is not None and row[4] == 10
    live = {"r": (1, protocol._owner("A1"), "h", 0, 30, False)}
    granted, row, _ = judge(LeaseOp("renew", "r", epoch=1, ttl_ms=5), live, set(), 20)
    assert granted and row is not None and row[4] == 25


def test_settle_is_counted_from_the_end_of_the_writers_lease() -> None:
    """The model's settle rule: a released lease's end is when it was released, and absent
    settles only ``settle`` after both the marker and that end."""
    model = Model("m", Bounds(settle=2))
    s = protocol.initial(model)._replace(
        lease=Lease(1, "A1", -1, True), ends=(-1,), markers=((1, 5),)
    )
    assert not protocol.settles(s, model, 1)  # the lease ended 1 ago: 1 more to wait
    assert protocol.settles(s._replace(ends=(-2,)), model, 1)
    live = s._replace(lease=Lease(1, "A1", 1, False), ends=(1,))
    assert not protocol.settles(live, model, 1)  # in flight
    assert not protocol.settles(s._replace(ends=(-2,)), Model("m", Bounds(settle=None)), 1)


def test_the_margin_stands_for_the_stall_and_the_drift() -> None:
    """The model's bounds keep the assumption they state: drift + stall <= margin < ttl."""
    for model in (*MAIN, *DEEP):
        b = model.bounds
        assert b.stall is not None and b.drift + b.stall <= b.margin < b.ttl
        assert b.settle is None or b.settle >= b.provider_delay


def test_the_send_deadline_is_counted_from_the_request_less_the_margin() -> None:
    """The model's send check: ``ttl - margin`` after the granted request left, own clock."""
    margin = min(ownership.SEND_MARGIN, ownership.DEFAULT_TTL / 4)
    assert ownership.send_deadline(5.0, ownership.DEFAULT_TTL) == pytest.approx(
        5.0 + ownership.DEFAULT_TTL - margin
    )
    # A positive margin, and a send window longer than a renewal interval (a third of the
    # ttl), as the model's bounds have it (margin 2 of ttl 3 would not, in seconds; in ticks
    # the model's margin stands for the stall and the drift it covers, not for its size).
    assert 0 < margin < ownership.DEFAULT_TTL * 2 / 3


def test_settle_is_counted_as_the_reconcilers_code_counts_it() -> None:
    """The model's ``settles`` agrees with ``reconcile.settles_at_ms`` on the journal's clock:
    ``settle`` after the end of the lease under which the attempt was marked."""
    for settle in (1, 2, 3):
        model = Model("m", Bounds(settle=settle))
        for end in range(-4, 2):  # the lease ended (or ends) this many ticks from now
            s = protocol.initial(model)._replace(
                lease=Lease(1, "A1", end, end <= 0), ends=(end,), markers=((1, settle),)
            )
            now_ms = 10_000
            code = now_ms >= settles_at_ms(now_ms + end * 1000, settle)
            assert protocol.settles(s, model, 1) == code, (settle, end)


def test_no_declared_settle_time_is_none_absent_never_settles() -> None:
    @tool
    async def charge() -> str:
        """Charge."""
        return "ok"

    assert settle_seconds(charge) is None
    assert Bounds(settle=None).settle is None  # the model's "no settle declared"


def test_a_resolution_names_its_attempt() -> None:
    """The model's ``resolve`` takes the attempt judged; so does the journal's."""
    assert "attempt" in inspect.signature(Journal.resolve).parameters
    assert "judged" in inspect.signature(protocol.resolve).parameters


def test_the_default_rules_are_bides() -> None:
    assert Rules() == Rules(
        bind_resolution=True,
        send_check=True,
        settle_on_journal_clock=True,
        settle_when_asked=True,
        fencing=True,
        revive_expired=False,
    )
