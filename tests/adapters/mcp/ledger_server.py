"""A payments server over MCP stdio, ``python -m tests.adapters.mcp.ledger_server`` (LEDGER: a
file).

``charge`` writes one ledger line per charge with the idempotency key the host sent in ``_meta``;
``find_charge`` looks a charge up by that key and answers by the lookup convention of
``adapters.mcp.reconcile``.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import Context, MCPServer

IDEMPOTENCY_KEY_META = "dev.bide/idempotency-key"

server = MCPServer("ledger")


def _lines() -> list[dict[str, object]]:
    path = os.environ["LEDGER"]
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@server.tool()
def charge(amount: int, ctx: Context) -> str:
    """Charge a card (a side effect)."""
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_KEY_META) if isinstance(meta, dict) else None
    with open(os.environ["LEDGER"], "a") as f:
        f.write(json.dumps({"key": key, "amount": amount}) + "\n")
    return json.dumps({"charged": amount})


@server.tool()
def find_charge(idempotency_key: str) -> str:
    """Find the charge made with this idempotency key (read-only)."""
    for line in _lines():
        if line["key"] == idempotency_key:
            return json.dumps(
                {
                    "found": True,
                    "value": {"charged": line["amount"]},
                    "evidence": f"ledger line with amount {line['amount']}",
                }
            )
    return json.dumps({"found": False, "evidence": "no ledger line has this key"})


if __name__ == "__main__":
    server.run()
