"""A small MCP server for docs/mcp.md: an order desk with one tool of each kind of Safety, and a
lookup that finds a refund by the idempotency key it was made with.

Run it over stdio (``python examples/mcp_server.py``); bide starts it as a child process.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("order-desk")


class Order(BaseModel):
    order_id: str
    status: str
    refunded_cents: int = 0


orders = {"A-1": Order(order_id="A-1", status="paid")}
refunds: dict[str, int] = {}
"""Each refund's cents, by the idempotency key the host sent in the call's ``_meta``."""

IDEMPOTENCY_KEY_META = "dev.bide/idempotency-key"


def _order(order_id: str) -> Order:
    if order_id not in orders:
        raise ValueError(f"no order {order_id}")
    return orders[order_id]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_order(order_id: str) -> Order:
    """Look an order up."""
    return _order(order_id)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def set_status(order_id: str, status: str) -> Order:
    """Set an order's status; setting the same status twice changes nothing."""
    _order(order_id).status = status
    return _order(order_id)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def refund(order_id: str, cents: int, ctx: Context) -> Order:
    """Refund part of an order. Each call refunds again: run it at most once."""
    _order(order_id).refunded_cents += cents
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_KEY_META) if isinstance(meta, dict) else None
    if isinstance(key, str):
        refunds[key] = cents
    return _order(order_id)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def find_refund(idempotency_key: str) -> dict[str, Any]:
    """Find the refund made with this idempotency key, if there is one."""
    if idempotency_key in refunds:
        cents = refunds[idempotency_key]
        return {"found": True, "evidence": f"a refund of {cents} cents has this key"}
    return {"found": False, "evidence": "no refund has this key"}


if __name__ == "__main__":
    server.run()
