"""The payment provider the framework adapters' test agents charge: a ledger file outside the
journal, one line per charge with bide's idempotency key (``$BIDE_TEST_LEDGER``; the CLI's
child processes are given it too); with ``$BIDE_TEST_DROP_REPLY`` set, a charge is made and its
reply then lost."""

from __future__ import annotations

import os

LEDGER = "BIDE_TEST_LEDGER"
DROP_REPLY = "BIDE_TEST_DROP_REPLY"


def charge(customer: str, cents: int, key: str) -> None:
    """Charge: append the ledger line, then lose the reply if asked to."""
    with open(os.environ[LEDGER], "a") as f:
        f.write(f"{customer} {cents} {key}\n")
    if os.environ.get(DROP_REPLY):
        raise ConnectionError("the provider's reply was lost after the charge was sent")


def ledger_lines() -> list[str]:
    try:
        with open(os.environ[LEDGER]) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []
