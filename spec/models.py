"""The configurations checked: the model of bide (``MAIN``, ``DEEP``) and the known bugs
(``MUTANTS``), each with the property it must break."""

from __future__ import annotations

from dataclasses import dataclass, replace

from spec.protocol import AT_MOST_ONCE, BOUND_RESOLUTION, FENCED_WRITE, Bounds, Model, Rules

__all__ = ["DEEP", "MAIN", "MUTANTS", "Mutant"]

SMALL = Bounds(epochs=2, attempts=2, crashes=0, cancel=False)
"""The default bounds: two drivers, two leases, two attempts, no crash, no cancel."""

MAIN = (
    Model("bide: leases, send check, reconciler", replace(SMALL, operator=False)),
    Model("bide: leases, send check, operator", replace(SMALL, drivers=1, reconciler=False)),
    Model("bide: no settle declared", replace(SMALL, settle=None, operator=False)),
)
"""The model of bide as its code decides leases, at the default bounds."""

DEEP = (
    Model("bide, deep: three leases, three attempts", Bounds(crashes=0, cancel=False)),
    Model("bide, deep: a crash and a cancel", replace(SMALL, crashes=1, cancel=True)),
    Model(
        "bide, deep: a longer lease, a slower provider",
        replace(SMALL, ttl=4, provider_delay=3, settle=3),
    ),
)
"""Deeper bounds (minutes): run with ``--deep``, or the tests with ``-m slow``."""


@dataclass(frozen=True)
class Mutant:
    """A known bug: the model with it must break ``violates``."""

    model: Model
    violates: str


_RECONCILER = replace(SMALL, operator=False)
_OPERATOR = replace(SMALL, drivers=1, reconciler=False, attempts=3, epochs=3)

MUTANTS = (
    Mutant(
        Model("resolution not bound to its attempt", _OPERATOR, Rules(bind_resolution=False)),
        BOUND_RESOLUTION,
    ),
    Mutant(
        Model("resolution not bound: a second charge", _OPERATOR, Rules(bind_resolution=False)),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model(
            "settle = the tool's timeout, shorter than the provider's delay",
            replace(_RECONCILER, settle=1, provider_delay=2),
            Rules(),
        ),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model("no lease check before the send", _RECONCILER, Rules(send_check=False)),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model(
            "settle judged on the reconciler's clock, ahead of the journal's",
            _RECONCILER,
            Rules(settle_on_journal_clock=False),
        ),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model(
            "a stall between the check and the send longer than the margin",
            replace(_RECONCILER, stall=None),
            Rules(),
        ),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model(
            "settle judged when the reconciler's answer is back",
            _RECONCILER,
            Rules(settle_when_asked=False),
        ),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model(
            "a renewal revives a lease that expired while nobody took it",
            _RECONCILER,
            Rules(revive_expired=True),
        ),
        AT_MOST_ONCE,
    ),
    Mutant(
        Model("appends not fenced", _RECONCILER, Rules(fencing=False)),
        FENCED_WRITE,
    ),
)
