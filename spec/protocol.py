"""The ownership and settling protocol of one side-effecting call, as a transition system.

One run holding one SIDE_EFFECT call; drivers (workers) that lease the run; the journal (the
lease row, attempt markers, results); a provider that applies a sent request at any moment
within a bound; a reconciler; an operator; cancel; discrete time on the journal's clock.
``successors`` gives every step enabled in a state, ``violations`` the properties it breaks.
Lease decisions are not restated here: every acquire, renew and release is decided by the
lease rule the SQLite and memory stores decide with (``runtime.store.leases.judge``).

Time is kept relative: a state holds ages ("sent 1 tick ago") and remainders ("expires in
2"), each clamped at the largest value any rule compares it with. Two states that differ only
beyond those values behave alike, so the clamped space is finite and exploring it covers every
schedule of any length, with no bound on time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from runtime.ownership import boot_id
from runtime.store.leases import judge
from runtime.store.ops import LeaseOp

__all__ = [
    "AT_MOST_ONCE",
    "BOUND_RESOLUTION",
    "FENCED_WRITE",
    "ONE_SENDER",
    "PROPERTIES",
    "Action",
    "Bounds",
    "Driver",
    "Lease",
    "Model",
    "Result",
    "Rules",
    "State",
    "describe",
    "initial",
    "successors",
    "violations",
]

# --- what the model is given --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bounds:
    """The bounds of one exploration, in ticks of the journal's clock.

    Two of them are the protocol's timing assumptions: a driver's monotonic clock drifts from
    the journal's by at most ``drift`` over one lease, and a driver stalls at most ``stall``
    between its send check and the send (``None``: for any length). The send margin stands for
    ``drift + stall <= margin``. The tool's declared ``settle`` must cover ``provider_delay``:
    that one is the user's obligation.
    """

    drivers: int = 2
    ttl: int = 3
    margin: int = 2
    """``SEND_MARGIN``: a driver sends only before ``granted_at + ttl - margin``, own clock."""
    drift: int = 1
    stall: int | None = 1
    provider_delay: int = 2
    """The provider applies a request less than this long after it was sent, or never."""
    settle: int | None = 2
    """The tool's declared settle time; ``None``: none declared ("absent" never settles)."""
    reconciler_skew: int = 2
    """How far ahead of the journal's clock the reconciler's own (wall) clock runs."""
    attempts: int = 3
    epochs: int = 3
    """At most this many leases granted (each grant is a new epoch)."""
    crashes: int = 1
    cancel: bool = True
    """Whether an operator may cancel the run."""
    reconciler: bool = True
    """Whether the tool has a reconciler."""
    operator: bool = True
    """Whether an operator resolves halted calls."""


@dataclass(frozen=True, slots=True)
class Rules:
    """The rules the protocol follows: all True is bide after issue 27; a mutant breaks one."""

    bind_resolution: bool = True
    """A resolution is recorded for the attempt it judged, and refused if that is not the
    call's current unresolved one. False: it applies to whatever attempt is current."""
    send_check: bool = True
    """The driver checks its own monotonic deadline right before it sends. False: it checks
    only whether a renewal has already told it its lease is lost."""
    settle_on_journal_clock: bool = True
    """False: "absent" is judged on the reconciler's own clock, ``reconciler_skew`` ahead."""
    settle_when_asked: bool = True
    """The settle time is judged at the moment the reconciler looks the effect up. False: when
    its answer comes back, later."""
    fencing: bool = True
    """The store refuses an append whose epoch is not the lease's."""
    revive_expired: bool = False
    """A mutant of the stores before the model found it: a renewal of a lease that expired
    while nobody took it over is granted (its epoch matches). False: the stores' ``judge``,
    which refuses it (the lease must be acquired anew, with a new epoch)."""


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    bounds: Bounds = field(default_factory=Bounds)
    rules: Rules = field(default_factory=Rules)

    @property
    def horizon(self) -> int:
        """How far back a state remembers: the largest age a settle rule compares with."""
        return self.bounds.settle or 0

    @property
    def send_window(self) -> int:
        """The age of a granted request past which no driver's clock lets it send."""
        b = self.bounds
        return max(0, b.ttl - b.margin + b.drift)


# --- the state ----------------------------------------------------------------------------

# A driver's program counter.
IDLE, ASKING, HOLD, MARKED, CHECKED, SENT = range(6)

NOT_EXECUTED, VALUE = "not_executed", "value"
ABSENT = "absent"
"""A reconciler's answer whose settle time is still to be judged (``settle_when_asked=False``)."""


class Lease(NamedTuple):
    """The run's lease row."""

    epoch: int
    owner: str
    expires: int
    """Ticks until it expires (0 or less: expired)."""
    released: bool


class Driver(NamedTuple):
    """One worker process, as it sees itself."""

    name: str
    life: int
    """Bumped by a crash: the restarted process is another owner; the old one is gone."""
    pc: int
    epoch: int
    """The epoch it holds (0: none)."""
    granted: int
    """How long ago, on the journal's clock, it sent the acquire or renew request that was
    last granted: its deadline is when its own clock says ``ttl - margin`` since then."""
    asked: int
    """How long ago it sent the acquire or renew request still in flight (-1: none)."""
    k: int
    """The attempt it marked (0: none)."""
    checked: int
    """How long ago it passed its send check (-1: not yet)."""
    lost: bool
    """A renewal told it that its lease is lost."""

    @property
    def owner(self) -> str:
        return f"{self.name}{self.life}"


class Result(NamedTuple):
    """``result/<call>/<attempt>``: a driver's result or a resolution."""

    attempt: int
    outcome: str
    judged: int
    """The attempt the resolver judged (a driver's own result: its attempt)."""
    by: str


class State(NamedTuple):
    lease: Lease | None
    ends: tuple[int, ...]
    """Per epoch (``ends[e - 1]``): ticks until the end of that epoch's lease (negative: since),
    the end of the lease of the owner that wrote a marker under it."""
    markers: tuple[tuple[int, int], ...]
    """Per attempt (``markers[k - 1]``): the epoch it was written under, and its age."""
    results: tuple[Result, ...]
    late: bool
    """A driver's result arrived after a resolution of its attempt (``late/``): it stands."""
    cancelled: bool
    pending: tuple[tuple[int, int], ...]
    """Requests at the provider, not yet applied: (attempt, age)."""
    applied: tuple[int, ...]
    """The attempts whose effect the provider applied, in order."""
    drivers: tuple[Driver, ...]
    reconciler: tuple[int, str] | None
    """A verdict in hand: (attempt judged, outcome)."""
    operator: tuple[int, str] | None
    granted_epoch: int
    stale_write: bool
    """A driver's write landed although a newer epoch had been granted."""
    crashes: int


Action = tuple[object, ...]
"""What happened in one step, e.g. ``("mark", "A", 1, 1)``; ``describe`` says it in words."""


def _idle(name: str, life: int = 1) -> Driver:
    return Driver(name, life, IDLE, 0, -1, -1, 0, -1, False)


def initial(model: Model) -> State:
    drivers = tuple(_idle(chr(ord("A") + i)) for i in range(model.bounds.drivers))
    return State(None, (), (), (), False, False, (), (), drivers, None, None, 0, False, 0)


# --- the journal's rules ------------------------------------------------------------------

RUN, HOST, NOW = "run", "host", 1_000_000
"""The one run; every owner's host (no owner is a process this host can see, except by the
model's own ``gone``); the journal's clock when a lease op is decided (a state is relative)."""


@functools.cache
def lease_decision(
    action: Literal["acquire", "renew", "release"],
    lease: Lease | None,
    epoch: int | None,
    owner: str,
    ttl: int,
) -> tuple[bool, Lease | None]:
    """The store's own decision on one lease op: whether it was granted, and the lease after."""
    leases = {}
    if lease is not None:
        row = (lease.epoch, _owner(lease.owner), HOST, 0, NOW + lease.expires, lease.released)
        leases[RUN] = row
    op = LeaseOp(action, RUN, epoch=epoch, owner=_owner(owner), host=HOST, ttl_ms=ttl)
    granted, _, _ = judge(op, leases, set(), NOW)
    after = leases.get(RUN)
    if after is None:
        return granted, None
    return granted, Lease(after[0], json.loads(after[1])["id"], after[4] - NOW, after[5])


def _owner(owner: str) -> str:
    """An owner as a lease row holds it: timed on this boot's clock, the journal's."""
    clock = boot_id()
    if clock is None:  # pragma: no cover - the model runs where the journal's clock is a boot's
        raise RuntimeError("the model needs a Linux boot id: leases are timed on its clock")
    return json.dumps({"id": owner, "clock": clock})


def live(s: State) -> bool:
    return s.lease is not None and not s.lease.released and s.lease.expires > 0


def current(s: State) -> int:
    """The call's current attempt if it is marked and unresolved (0 otherwise)."""
    k = len(s.markers)
    if k == 0 or any(r.attempt == k for r in s.results):
        return 0
    return k


def done(s: State) -> bool:
    return s.late or any(r.outcome != NOT_EXECUTED for r in s.results)


def next_attempt(s: State, model: Model) -> int:
    """The attempt a driver may mark now (0: none)."""
    k = len(s.markers)
    if done(s) or s.cancelled or k >= model.bounds.attempts:
        return 0
    if k and not any(r.attempt == k and r.outcome == NOT_EXECUTED for r in s.results):
        return 0  # attempted, unresolved: it halts
    return k + 1


def in_flight(s: State, k: int) -> bool:
    """Attempt ``k``'s marker was written under the lease that is live now."""
    return live(s) and s.lease is not None and s.markers[k - 1][0] == s.lease.epoch


def settles(s: State, model: Model, k: int) -> bool:
    """Whether an "absent" about attempt ``k`` may settle it as "not executed" now: the writer's
    lease is no longer live, and the clock has reached the later of the marker and the end of
    that lease, plus the declared settle time."""
    settle = model.bounds.settle
    if settle is None or in_flight(s, k):
        return False
    epoch, age = s.markers[k - 1]
    if not model.rules.settle_on_journal_clock:
        settle -= model.bounds.reconciler_skew  # its clock says later than the journal's
    return age >= settle and -s.ends[epoch - 1] >= settle


def resolve(s: State, model: Model, judged: int, outcome: str, by: str) -> State | None:
    """``Journal.resolve(..., attempt=judged)``: the state with the resolution recorded, or
    None when the store refuses it."""
    k = current(s)
    target = judged if model.rules.bind_resolution else k
    if k == 0 or target != k or in_flight(s, k):
        return None
    return s._replace(results=(*s.results, Result(target, outcome, judged, by)))


def _write(s: State, model: Model, d: Driver) -> tuple[bool, bool]:
    """A driver's append under its epoch: (lands, stale), where stale says that a newer epoch
    had been granted (what fencing exists to refuse)."""
    stale = d.epoch != s.granted_epoch
    return not stale or not model.rules.fencing, stale


def _set(t: tuple[Driver, ...], i: int, d: Driver) -> tuple[Driver, ...]:
    return (*t[:i], d, *t[i + 1 :])


def _leased(s: State, lease: Lease) -> State:
    """``s`` with the lease row changed: its epoch's end follows."""
    e = lease.epoch
    return s._replace(lease=lease, ends=(*s.ends[: e - 1], lease.expires, *s.ends[e:]))


def _gone(s: State, owner: str) -> bool:
    """The owner is a process that crashed (its pid gone: taken over at once)."""
    return s.drivers[ord(owner[0]) - ord("A")].life > int(owner[1:])


# --- steps --------------------------------------------------------------------------------


def successors(s: State, model: Model) -> Iterator[tuple[Action, State]]:
    """Every step enabled in ``s``, with the state it leads to."""
    if _quiet(s):
        return
    for i, d in enumerate(s.drivers):
        yield from _driver(s, model, i, d)
    yield from _provider(s)
    if model.bounds.reconciler:
        yield from _reconciler(s, model)
    yield from _operator(s, model)
    yield from _tick(s, model)


def _quiet(s: State) -> bool:
    """Nothing that matters can happen any more: the call has its outcome and nothing of it is
    still on its way to the provider."""
    return done(s) and not s.pending and all(d.pc != CHECKED for d in s.drivers)


def _driver(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    b = model.bounds
    n = d.name
    if d.pc == IDLE:
        if not done(s) and s.granted_epoch < b.epochs:
            asking = d._replace(pc=ASKING, asked=0)
            yield ("ask", n), s._replace(drivers=_set(s.drivers, i, asking))
        return
    if d.pc == ASKING:
        yield from _acquired(s, model, i, d)
        return
    if s.crashes < b.crashes:
        reborn = _idle(n, d.life + 1)
        yield ("crash", n), s._replace(drivers=_set(s.drivers, i, reborn), crashes=s.crashes + 1)
    # Holding a lease (or believing it does): the renewer runs beside the drive.
    if d.asked < 0:
        if not d.lost:
            yield ("renew", n), s._replace(drivers=_set(s.drivers, i, d._replace(asked=0)))
    else:
        yield from _renewed(s, model, i, d)
    if d.pc == HOLD:
        yield from _hold(s, model, i, d)
    elif d.pc == MARKED:
        yield from _check(s, model, i, d)
    elif d.pc == CHECKED:
        sent = d._replace(pc=SENT, checked=-1)
        new = s._replace(pending=(*s.pending, (d.k, 0)), drivers=_set(s.drivers, i, sent))
        yield ("send", n, d.k), new
    elif d.pc == SENT:
        yield from _reply(s, model, i, d)


def _acquired(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    """The journal decides ``d``'s acquire request (``Holding.acquire``: a gone owner's lease
    is taken over at once, naming its epoch)."""
    ttl = model.bounds.ttl
    granted, lease = lease_decision("acquire", s.lease, None, d.owner, ttl)
    take_over = not granted and s.lease is not None and _gone(s, s.lease.owner)
    if take_over and s.lease is not None:
        granted, lease = lease_decision("acquire", s.lease, s.lease.epoch, d.owner, ttl)
    if not granted or lease is None:
        idle = d._replace(pc=IDLE, asked=-1)
        yield ("busy", d.name), s._replace(drivers=_set(s.drivers, i, idle))
        return
    held = d._replace(pc=HOLD, epoch=lease.epoch, granted=d.asked, asked=-1, lost=False)
    new = s._replace(
        lease=lease,
        ends=(*s.ends, lease.expires),
        drivers=_set(s.drivers, i, held),
        granted_epoch=lease.epoch,
    )
    yield ("grant", d.name, lease.epoch, lease.expires, take_over), new


def _renewed(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    """The journal decides ``d``'s renewal (``Renewer._renew_due``)."""
    lease = s.lease
    after: Lease | None = lease
    if (
        model.rules.revive_expired
        and lease is not None
        and lease.epoch == d.epoch
        and not lease.released
        and lease.expires <= 0
    ):
        granted, after = True, Lease(lease.epoch, lease.owner, model.bounds.ttl, False)
    else:
        granted, after = lease_decision("renew", lease, d.epoch, d.owner, model.bounds.ttl)
    if granted and after is not None:
        held = d._replace(granted=d.asked, asked=-1)
        new = _leased(s, after)._replace(drivers=_set(s.drivers, i, held))
        yield (
            ("renewed", d.name, d.epoch, after.expires, lease is not None and lease.expires <= 0),
            new,
        )
        return
    lost = d._replace(asked=-1, lost=True)
    if d.pc in (HOLD, MARKED):  # the drive stops at its next check
        lost = _idle(d.name, d.life)
    yield ("renew_refused", d.name, d.epoch), s._replace(drivers=_set(s.drivers, i, lost))


def _stop(s: State, model: Model, i: int, d: Driver, why: str) -> tuple[Action, State]:
    """The drive ends (halted, or done) and releases its lease."""
    granted, lease = lease_decision("release", s.lease, d.epoch, d.owner, model.bounds.ttl)
    new = s._replace(drivers=_set(s.drivers, i, _idle(d.name, d.life)))
    if granted and lease is not None:
        new = _leased(new, lease)
    return (why, d.name, d.epoch, d.k, granted), new


def _hold(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    k = next_attempt(s, model)
    if k and not d.lost:
        lands, stale = _write(s, model, d)
        if lands:
            marked = d._replace(pc=MARKED, k=k)
            new = s._replace(
                markers=(*s.markers, (d.epoch, 0)),
                drivers=_set(s.drivers, i, marked),
                stale_write=s.stale_write or stale,
            )
            yield ("mark", d.name, k, d.epoch), new
        else:
            idle = s._replace(drivers=_set(s.drivers, i, _idle(d.name, d.life)))
            yield ("fenced", d.name, d.epoch, "marker"), idle
    yield _stop(s, model, i, d, "release")


def _check(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    """Right before the send: the lease is live by the driver's own monotonic deadline (its
    clock within ``drift`` of the journal's since its granted request)."""
    b = model.bounds
    if model.rules.send_check:
        can_pass = not d.lost and d.granted - b.drift < b.ttl - b.margin
        can_fail = d.lost or d.granted + b.drift >= b.ttl - b.margin
    else:
        can_pass, can_fail = not d.lost, d.lost
    if can_pass:
        passed = d._replace(pc=CHECKED, checked=0)
        yield ("check", d.name, d.k, d.granted), s._replace(drivers=_set(s.drivers, i, passed))
    if can_fail:  # it sends nothing: the call is left attempted, outcome unknown; it halts
        yield _stop(s, model, i, d, "check_failed")


def _reply(s: State, model: Model, i: int, d: Driver) -> Iterator[tuple[Action, State]]:
    if d.k in s.applied:
        lands, stale = _write(s, model, d)
        if not lands:
            idle = s._replace(drivers=_set(s.drivers, i, _idle(d.name, d.life)))
            yield ("fenced", d.name, d.epoch, "result"), idle
        else:
            held = d._replace(pc=HOLD, k=0)
            new = s._replace(drivers=_set(s.drivers, i, held), stale_write=s.stale_write or stale)
            if any(r.attempt == d.k for r in s.results):
                yield ("late", d.name, d.k), new._replace(late=True)
            else:
                result = Result(d.k, VALUE, d.k, d.name)
                yield ("result", d.name, d.k), new._replace(results=(*s.results, result))
    # No answer in time (or a lost connection): the outcome is unknown, the drive halts.
    yield _stop(s, model, i, d, "timeout")


def _provider(s: State) -> Iterator[tuple[Action, State]]:
    for j, (k, age) in enumerate(s.pending):
        rest = (*s.pending[:j], *s.pending[j + 1 :])
        yield ("apply", k, age), s._replace(pending=rest, applied=(*s.applied, k))
        yield ("drop", k, age), s._replace(pending=rest)


def _reconciler(s: State, model: Model) -> Iterator[tuple[Action, State]]:
    """A reconciler outside any drive (``settle_run``): it looks the call's effect up, and
    later its verdict is journaled through ``Journal.resolve``."""
    verdict = s.reconciler
    if verdict is None:
        k = current(s)
        if k == 0:
            return
        if s.applied:
            yield ("look", k, VALUE), s._replace(reconciler=(k, VALUE))
        elif not model.rules.settle_when_asked:
            yield ("look", k, ABSENT), s._replace(reconciler=(k, ABSENT))
        elif settles(s, model, k):
            yield ("look", k, NOT_EXECUTED), s._replace(reconciler=(k, NOT_EXECUTED))
        return
    k, outcome = verdict
    idle = s._replace(reconciler=None)
    if outcome == ABSENT:
        if not settles(s, model, k):
            yield ("wait", k), idle  # tried again later
            return
        outcome = NOT_EXECUTED
    new = resolve(idle, model, k, outcome, "reconciler")
    if new is None:
        yield ("refused", "reconciler", k, outcome, current(s)), idle
    else:
        yield ("resolved", "reconciler", k, outcome, current(s)), new


def _operator(s: State, model: Model) -> Iterator[tuple[Action, State]]:
    if model.bounds.cancel and not s.cancelled:
        yield ("cancel",), s._replace(cancelled=True)
    verdict = s.operator
    if not model.bounds.operator:
        return
    if verdict is None:
        k = current(s)
        if k == 0 or in_flight(s, k):
            return  # a person judges only a halted call
        # A person who knows what the provider knows: what it applied, and what is on its way.
        if s.applied:
            yield ("judge", k, VALUE), s._replace(operator=(k, VALUE))
        elif not s.pending and all(d.pc != CHECKED for d in s.drivers):
            yield ("judge", k, NOT_EXECUTED), s._replace(operator=(k, NOT_EXECUTED))
        return
    k, outcome = verdict
    # The same resolution may be sent again later (a retry, a second console tab).
    new = resolve(s, model, k, outcome, "operator")
    if new is not None:
        yield ("resolved", "operator", k, outcome, current(s)), new
    yield ("forget",), s._replace(operator=None)


def _tick(s: State, model: Model) -> Iterator[tuple[Action, State]]:
    """One tick of the journal's clock: every age grows, every remainder shrinks (clamped)."""
    b = model.bounds
    if any(age + 1 >= b.provider_delay for _, age in s.pending):
        return  # the provider applies (or loses) a request within its delay bound
    if b.stall is not None and any(d.pc == CHECKED and d.checked >= b.stall for d in s.drivers):
        return  # a driver sends within its stall bound of the check
    h, w = model.horizon, model.send_window
    lease = s.lease
    if lease is not None:
        lease = lease._replace(expires=max(lease.expires - 1, -h))
    drivers = tuple(
        d
        if d.pc == IDLE
        else d._replace(asked=min(d.asked + 1, w))
        if d.pc == ASKING
        else d._replace(
            granted=min(d.granted + 1, w),
            asked=-1 if d.asked < 0 else min(d.asked + 1, w),
            checked=-1 if d.checked < 0 or b.stall is None else d.checked + 1,
        )
        for d in s.drivers
    )
    new = s._replace(
        lease=lease,
        ends=tuple(max(e - 1, -h) for e in s.ends),
        markers=tuple((e, min(age + 1, h)) for e, age in s.markers),
        pending=tuple((k, age + 1) for k, age in s.pending),
        drivers=drivers,
    )
    if new != s:
        yield ("tick",), new


# --- properties ---------------------------------------------------------------------------

AT_MOST_ONCE = "at most once: the effect was applied twice"
BOUND_RESOLUTION = "a resolution was recorded for an attempt other than the one judged"
FENCED_WRITE = "a write of a fenced (stale) epoch landed"
ONE_SENDER = "two owners able to send at once"
PROPERTIES = (AT_MOST_ONCE, BOUND_RESOLUTION, FENCED_WRITE, ONE_SENDER)


def able_to_send(s: State, model: Model, d: Driver) -> bool:
    """``d`` has marked an attempt and would send it now: it passed its check, or (some clock
    within the drift bound) it would pass it."""
    if d.pc == CHECKED:
        return True
    if d.pc != MARKED or d.lost:
        return False
    if not model.rules.send_check:
        return True
    b = model.bounds
    return d.granted - b.drift < b.ttl - b.margin


def violations(s: State, model: Model, properties: tuple[str, ...] = PROPERTIES) -> list[str]:
    """The properties ``s`` breaks, among ``properties``."""
    found = []
    if AT_MOST_ONCE in properties and len(s.applied) > 1:
        found.append(AT_MOST_ONCE)
    if BOUND_RESOLUTION in properties and any(r.attempt != r.judged for r in s.results):
        found.append(BOUND_RESOLUTION)
    if FENCED_WRITE in properties and s.stale_write:
        found.append(FENCED_WRITE)
    if ONE_SENDER in properties and sum(able_to_send(s, model, d) for d in s.drivers) > 1:
        found.append(ONE_SENDER)
    return found


# --- words --------------------------------------------------------------------------------


def describe(action: Action, model: Model) -> str:
    """One step of a trail, in words."""
    b = model.bounds
    match action:
        case ("ask", d):
            return f"worker {d} asks for the lease"
        case ("grant", d, epoch, ttl, take_over):
            how = "takes over a gone owner's lease" if take_over else "is granted the lease"
            deadline = f"it may send until {b.ttl - b.margin} after its request, own clock"
            return f"worker {d} {how}: epoch {epoch}, for {ttl} ({deadline})"
        case ("busy", d):
            return f"worker {d} is refused the lease: it is live"
        case ("crash", d):
            return f"worker {d} crashes (its process is gone; a new one may start)"
        case ("renew", d):
            return f"worker {d} sends a renewal"
        case ("renewed", d, epoch, ttl, revived):
            how = "revives" if revived else "renews"
            return f"the journal {how} {d}'s lease (epoch {epoch}) for {ttl}" + (
                " although it had expired" if revived else ""
            )
        case ("renew_refused", d, epoch):
            return f"the journal refuses {d}'s renewal of epoch {epoch}: {d} learns it is lost"
        case ("mark", d, k, epoch):
            return f"worker {d} writes the marker of attempt {k} under epoch {epoch}"
        case ("fenced", d, epoch, what):
            return f"the journal refuses {d}'s {what} of epoch {epoch} (fenced); {d} stops"
        case ("check", d, k, elapsed) if not model.rules.send_check:
            return f"worker {d} sends attempt {k} unless told its lease is lost: it was not"
        case ("check", d, k, elapsed):
            return (
                f"worker {d} checks its deadline before sending attempt {k} "
                f"({elapsed} since its granted request, within {b.drift} on its clock): live"
            )
        case ("check_failed", d, epoch, k, released):
            return (
                f"worker {d}'s deadline has passed: it sends nothing of attempt {k} and halts"
                + (", releasing its lease" if released else "")
            )
        case ("send", d, k):
            return f"worker {d} sends attempt {k} to the provider"
        case ("apply", k, age):
            return f"the provider applies attempt {k} (sent {age} ago)"
        case ("drop", k, age):
            return f"the provider loses the request of attempt {k} (sent {age} ago)"
        case ("result", d, k):
            return f"worker {d} records the result of attempt {k}"
        case ("late", d, k):
            return f"worker {d}'s result of attempt {k} arrives after its resolution (late)"
        case ("timeout", d, epoch, k, released):
            return f"worker {d} gets no answer for attempt {k}: it halts" + (
                ", releasing its lease" if released else ""
            )
        case ("release", d, epoch, k, released):
            return f"worker {d} ends its drive" + (
                f", releasing epoch {epoch}" if released else " (its lease had moved on)"
            )
        case ("look", k, said):
            return (
                f"the reconciler looks attempt {k} up: "
                + {
                    VALUE: "found",
                    NOT_EXECUTED: "absent, and its settle time has passed",
                    ABSENT: "absent (its settle time to be judged when the answer is back)",
                }[str(said)]
            )
        case ("wait", k):
            return f"the reconciler's absent about attempt {k} does not settle yet"
        case ("refused", who, k, outcome, cur):
            return f"the {who}'s {outcome} about attempt {k} is refused (current: {cur or '-'})"
        case ("resolved", who, k, outcome, cur):
            return f"the {who} resolves attempt {k} as {outcome}: recorded for attempt {cur}"
        case ("judge", k, outcome):
            return f"an operator judges halted attempt {k}: {outcome}"
        case ("forget",):
            return "the operator closes the page"
        case ("cancel",):
            return "an operator cancels the run"
        case ("tick",):
            return "one tick passes"
    return repr(action)  # pragma: no cover - every action has its words above
