"""The ledger tools served over MCP stdio: ``python -m tests.crash.server`` (the agent spawns it).

The server writes the ledger itself, so an effect is recorded by the process that performed it.
When the agent is killed, the server lives on: a request already received runs to its end (the
tools are synchronous, and the SDK waits for a worker thread that is running one), then the
server sees its stdin close and exits. While alive it holds a shared lock on
``CRASH_SERVER_LOCK``, so a test waits for the last server with an exclusive lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

from mcp.server.mcpserver import Context, MCPServer

from tests.crash.agents import TOOLS, Settings
from tests.crash.ledger import Ledger, now_ms

IDEMPOTENCY_KEY_META = "dev.bide/idempotency-key"

settings = Settings.from_env()
ledger = Ledger(settings.ledger)
server = MCPServer("crash-ledger")


def effect(name: str, n: int, run: str, call: str, ctx: Context) -> str:
    started = now_ms()
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_KEY_META) if isinstance(meta, dict) else None
    ledger.begin(run, call, name)
    before, after = settings.pauses(run, call)
    time.sleep(before)
    value = ledger.execute(
        run_id=run,
        call_id=call,
        tool=name,
        safety=TOOLS[name].value,
        key=key if isinstance(key, str) else None,
        started_ms=started,
        n=n,
    )
    time.sleep(after)
    return json.dumps(value, sort_keys=True)


@server.tool()
def lookup(n: int, run: str, call: str, ctx: Context) -> str:
    """Read a balance (read-only)."""
    return effect("lookup", n, run, call, ctx)


@server.tool()
def upsert(n: int, run: str, call: str, ctx: Context) -> str:
    """Store a record, once per idempotency key."""
    return effect("upsert", n, run, call, ctx)


@server.tool()
def charge(n: int, run: str, call: str, ctx: Context) -> str:
    """Charge a card (a side effect)."""
    return effect("charge", n, run, call, ctx)


def main() -> None:
    lock_path = os.environ.get("CRASH_SERVER_LOCK")
    if lock_path:
        # Taken before serving: no request can reach a server that a waiting test cannot see.
        lock = open(lock_path, "a+")  # noqa: SIM115 (held until the process exits)
        fcntl.flock(lock, fcntl.LOCK_SH)
    server.run()


if __name__ == "__main__":
    main()
