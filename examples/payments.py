"""A payments agent: look a customer up, note the request, charge their card.

The code is ``runtime/_demo/payments.py``, shipped inside bide so that ``python -m runtime demo``
runs from an installed wheel; read it there (and copy it to start your own agent). From a
checkout, this module names the same agent:

    python -m runtime run --agent examples.payments:make_agent "Charge ann 12.00 for May"
"""

from runtime._demo.payments import (
    SCRIPT,
    PaymentsLedger,
    ledger_path,
    make_agent,
)

__all__ = ["SCRIPT", "PaymentsLedger", "ledger_path", "make_agent"]
