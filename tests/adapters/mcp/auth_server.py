"""An MCP server over streamable HTTP that needs authorization, with its own small OAuth
authorization server beside it: ``python -m tests.adapters.mcp.auth_server PORT``.

The MCP endpoint (``/mcp``) takes a bearer token: ``good-token``, or one the token endpoint
issued. Without one it answers 401 with a ``WWW-Authenticate`` challenge naming its
protected-resource metadata (RFC 9728); ``weak-token`` gets 403 ``insufficient_scope``. The
authorization server publishes its metadata (RFC 8414) and grants client credentials to
``bide-client`` / ``s3cret`` (HTTP basic). ``POST /revoke`` with ``token=T&to=none|weak``
revokes a token (401 from then on) or takes its scope away (403), as an operator would while a
client is connected. Each request is a ledger line (LEDGER): ``mcp
<status>``, ``token <grant>``, ``metadata <path>``, ``call <tool> <key>``.
"""

from __future__ import annotations

import base64
import itertools
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

CLIENT = ("bide-client", "s3cret")
TOKENS = {"good-token", "temp-token"}
WEAK = {"weak-token"}


def note(line: str) -> None:
    with open(os.environ["LEDGER"], "a") as f:
        f.write(line + "\n")


def mcp_server() -> MCPServer:
    server = MCPServer("guarded")

    @server.tool()
    def pay(amount: int, ctx: Context) -> str:
        """Pay an amount (a side effect)."""
        meta = ctx.request_context.meta or {}
        key = meta.get("dev.bide/idempotency-key") if isinstance(meta, dict) else None
        note(f"call pay {key}")
        return f"paid {amount}"

    @server.tool()
    def refuse() -> str:
        """Answer with a JSON-RPC error whose code the SDK also makes up for a lost answer."""
        note("call refuse")
        raise MCPError(code=-32603, message="declined by the server")

    return server


class Guarded:
    """The MCP app behind a bearer-token check, and the OAuth endpoints beside it."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.app = mcp_server().streamable_http_app()
        self.issued = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path.startswith("/.well-known/"):
            note(f"metadata {path}")
            await self._metadata(path)(scope, receive, send)
            return
        if path == "/revoke":
            form = await _form(receive)
            TOKENS.discard(form.get("token", ""))
            if form.get("to") == "weak":
                WEAK.add(form.get("token", ""))
            note(f"revoke {form.get('to')}")
            await Response(status_code=204)(scope, receive, send)
            return
        if path == "/token":
            await (await self._token(headers, receive))(scope, receive, send)
            return
        token = headers.get("authorization", "").removeprefix("Bearer ")
        challenge = (
            f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp", '
            'scope="payments"'
        )
        if token in WEAK:
            note("mcp 403")
            denied = f'{challenge}, error="insufficient_scope"'
            await Response(status_code=403, headers={"WWW-Authenticate": denied})(
                scope, receive, send
            )
            return
        if token not in TOKENS:
            note("mcp 401")
            await Response(status_code=401, headers={"WWW-Authenticate": challenge})(
                scope, receive, send
            )
            return
        note("mcp 200")
        await self.app(scope, receive, send)

    def _metadata(self, path: str) -> Response:
        if path.startswith("/.well-known/oauth-protected-resource"):
            return JSONResponse(
                {
                    "resource": f"{self.base}/mcp",
                    "authorization_servers": [self.base],
                    "scopes_supported": ["payments"],
                }
            )
        if path.startswith("/.well-known/oauth-authorization-server"):
            return JSONResponse(
                {
                    "issuer": self.base,
                    "authorization_endpoint": f"{self.base}/authorize",
                    "token_endpoint": f"{self.base}/token",
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                }
            )
        return Response(status_code=404)

    async def _token(self, headers: dict[str, str], receive: Receive) -> Response:
        form = await _form(receive)
        note(f"token {form.get('grant_type')}")
        given = headers.get("authorization", "").removeprefix("Basic ")
        expected = base64.b64encode(f"{CLIENT[0]}:{CLIENT[1]}".encode()).decode()
        if form.get("grant_type") != "client_credentials" or given != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = f"cc-token-{next(self.issued)}"
        TOKENS.add(token)
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": "payments",
        }
        return JSONResponse(answer)


async def _form(receive: Receive) -> dict[str, str]:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    return {k: v[0] for k, v in parse_qs(body.decode()).items()}


if __name__ == "__main__":
    port = int(sys.argv[1])
    Path(os.environ["LEDGER"]).touch()
    uvicorn.run(Guarded(port), host="127.0.0.1", port=port, log_level="warning")
