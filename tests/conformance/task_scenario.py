"""A task scenario beside the suite's (which has none for a client yet): bide's client against
a server over streamable HTTP that answers ``tools/call`` with a task in the shape the published
tasks extension gives it (SEP-2663, flattened), and in the drafts' nested shape.

``python -m tests.conformance.task_scenario``: for each shape, an agent run charges once; the
server answers with a task, bide journals its id, polls ``tasks/get`` to the result, and the run
completes; the server saw the call once. Prints one PASS or FAIL line per shape; exit 1 on a
failure.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus
from runtime import records as R
from runtime.testing import ScriptedModel

SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 5}}]},
    {"text": "charged"},
]


def start_server(ledger: Path, nested: bool) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "LEDGER": str(ledger), "TASK_SECONDS": "0.5", "POLL_MS": "100"}
    env["NESTED"] = "1" if nested else "0"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.adapters.mcp.task_server", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError("the task server did not start") from None
            time.sleep(0.1)


async def one(shape: str, folder: Path) -> str | None:
    """Why the scenario failed for ``shape``, or None if it passed."""
    ledger = folder / f"ledger-{shape}"
    server, url = start_server(ledger, nested=shape == "nested")
    try:
        async with connect(url, tasks=True, name="tasks", connect_timeout=60) as session:
            agent = Agent(model=ScriptedModel(SCRIPT), tools=await tools(session))
            async with Journal(folder / f"{shape}.db") as journal:
                result = await agent.run("r", "go", journal=journal)
                state = await journal.require("r")
    finally:
        server.kill()
        server.wait(timeout=10)
    seen = ledger.read_text().split("\n") if ledger.exists() else []
    records = [r for r in state.records if r.payload and r.payload.get("call_id") == "c1"]
    kinds = [r.kind for r in records]
    handles = [r.payload.get("handle") or {} for r in records if r.kind == R.HANDLE]
    if result.status is not RunStatus.COMPLETED:
        return f"the run ended {result.status.value}"
    # The attempt, the step naming the server and principal before the request left, the task
    # id the server answered, the result.
    if kinds != [R.ATTEMPT, R.HANDLE, R.HANDLE, R.RESULT]:
        return f"the call's records were {kinds}, not attempt, server step, task id, result"
    if "mcp_call" not in handles[0] or not handles[1].get("mcp_task"):
        return f"the call's steps were {handles}, not the server step then the task id"
    if sum(line.startswith("call ") for line in seen) != 1:
        return "the server did not see the call exactly once"
    if not any(line.startswith("get ") for line in seen):
        return "the result did not come by polling tasks/get"
    return None


async def main() -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for shape in ("published", "nested"):
            why = await one(shape, Path(folder))
            print(
                f"{'PASS' if why is None else 'FAIL'} bide-tasks ({shape} task answer)"
                + ("" if why is None else f": {why}")
            )
            failed += why is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
