"""An MCP server whose ``transfer`` asks for confirmation mid-call (SEP-2322 input rounds), in
process or as ``python -m tests.adapters.mcp.round_server PORT`` over streamable HTTP.

Round 1 answers with an input request and an opaque request state; round 2 must echo that
state byte for byte with a confirmation, and only then does the transfer happen (one ledger
line). Every round is a ledger line too, so a test can count what the server saw. The SDK
seals the state on the wire and refuses an echo that differs by a byte, so a round 2 that
reaches the tool carried the state exactly as sent.
Environment (as a process): LEDGER (a file), HANG_ROUND (a round to sit on without answering),
REFUSE_LATER_ROUNDS=1 (answer HTTP 401 to every round after the first).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.extension import Extension
from mcp.server.mcpserver import MCPServer

STATE = 'confirm 5 \u00fc "quoted" \\ {not: json}'
"""The state round 1 sends: characters a careless echo would change."""


class Rounds(Extension):
    identifier = "dev.bide-tests/rounds"

    def __init__(self, ledger: Path | None, *, hang_round: int = 0) -> None:
        self.ledger = ledger
        self.seen: list[str] = []
        self.hang_round = hang_round
        self.server: MCPServer | None = None

    def note(self, line: str) -> None:
        self.seen.append(line)
        if self.ledger is not None:
            with open(self.ledger, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())

    def count(self, word: str) -> int:
        return sum(1 for line in self.seen if line.split()[0] == word)

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        if params.name != "transfer":
            return await call_next(ctx)
        n = 1 if params.request_state is None else 2
        self.note(f"round {n}")
        if self.hang_round == n:
            await asyncio.sleep(3600)
        if n == 1:
            ask = {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": f"Send {params.arguments['amount']} to Bob?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                },
            }
            return {
                "resultType": "input_required",
                "inputRequests": {"confirm": ask},
                "requestState": STATE,
            }
        if params.request_state != STATE:
            self.note("state-mismatch")
            return _done("bad state", error=True)
        answer = (params.input_responses or {}).get("confirm")
        content = answer.content if answer is not None else None
        if not (answer is not None and answer.action == "accept" and content and content["ok"]):
            return _done("not confirmed", error=True)
        self.note(f"transfer {params.arguments['amount']}")
        return _done(json.dumps({"sent": 5}))


def _done(text: str, *, error: bool = False) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "isError": error,
    }


def round_server(rounds: Rounds) -> MCPServer:
    """The server of ``rounds`` (one per extension: the SDK seals the request state it sends
    with a key of the server object's own, so only that server can read it back)."""
    if rounds.server is not None:
        return rounds.server
    server = rounds.server = MCPServer("bank", extensions=[rounds])

    @server.tool()
    def transfer(amount: int) -> str:
        """Send money once the host confirms (a side effect, in two rounds)."""
        return "unreachable: the extension answers"

    return server


def refusing_later_rounds(app: Any) -> Any:
    """``app`` answering 401 to every POST that continues a call (it carries a request state),
    as a server whose token check fails between rounds would (REFUSE_LATER_ROUNDS=1)."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"requestState"' in body:
            with open(os.environ["LEDGER"], "a") as f:
                f.write("refused 401\n")
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded


if __name__ == "__main__":
    import uvicorn

    hang = int(os.environ.get("HANG_ROUND", "0"))
    extension = Rounds(Path(os.environ["LEDGER"]), hang_round=hang)
    server = round_server(extension)
    if os.environ.get("REFUSE_LATER_ROUNDS") != "1":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        app = refusing_later_rounds(server.streamable_http_app())
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
