"""An MCP server the tests run as a child process: over stdio, or over HTTP with ``http PORT``.

``die`` records that it ran (in the file named by ``BIDE_TEST_RUNS``) and then kills the process
before answering: a server lost mid-call. With ``BIDE_TEST_HOSTILE`` set it lists more tools,
which misbehave as a hostile or broken server does: a JSON-RPC error reply, bytes that are not
UTF-8, an answer that is not JSON or not a JSON-RPC message, an endless line, a long nap that
keeps it from noticing its stdin close, raw control characters on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("stdio-test")

# The SDK's server points fd 1 at stderr while it serves; a copy taken first still reaches the
# client, for the tools that write on the wire behind the server's back.
_WIRE = os.dup(1)


def hostile(fn: Callable[..., str]) -> Callable[..., str]:
    """A tool only a server started with ``BIDE_TEST_HOSTILE`` set lists."""
    if os.environ.get("BIDE_TEST_HOSTILE"):
        server.tool()(fn)
    return fn


def _record(what: str) -> None:
    path = os.environ.get("BIDE_TEST_RUNS")
    if path:
        with open(path, "a", encoding="utf-8") as runs:
            runs.write(what + "\n")
            runs.flush()
            os.fsync(runs.fileno())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Say the text back."""
    _record("echo")
    return text


@server.tool()
def die() -> str:
    """Record the call, then exit without answering."""
    _record("die")
    os._exit(3)


@hostile
def refuse(code: int, message: str) -> str:
    """Record the call, then answer with a JSON-RPC error of the given code and message."""
    _record("refuse")
    raise MCPError(code=code, message=message)


@hostile
def garble() -> str:
    """Record the call, then write bytes that are not UTF-8 as a line on stdout."""
    _record("garble")
    os.write(_WIRE, b'{"jsonrpc": "2.0", "method": "\xff\xfe"}\n')
    time.sleep(60)
    return "never"


@hostile
def mumble(ctx: Context) -> str:
    """Record the call, then answer it with a line that is not JSON at all."""
    _record("mumble")
    os.write(_WIRE, b'{"jsonrpc": "2.0", "id": ' + ctx.request_id.encode() + b', "result": {\n')
    time.sleep(60)
    return "never"


@hostile
def malform(ctx: Context) -> str:
    """Record the call, then answer it with JSON that names its id and is no JSON-RPC reply."""
    _record("malform")
    request_id = int(ctx.request_id) if ctx.request_id.isdigit() else ctx.request_id
    os.write(_WIRE, json.dumps({"jsonrpc": "2.0", "id": request_id}).encode() + b"\n")
    time.sleep(60)
    return "never"


@hostile
def flood() -> str:
    """Record the call, then write one line on stdout that never ends."""
    _record("flood")
    block = b"x" * (1 << 16)
    while True:
        os.write(_WIRE, block)


@hostile
def nap(seconds: float) -> str:
    """Record the call with this process's id, then sleep, deaf to everything."""
    _record(f"nap {os.getpid()}")
    time.sleep(seconds)
    return "rested"


@hostile
def shout(text: str) -> str:
    """Write the text to stderr as it is, control characters and all."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return "shouted"


if __name__ == "__main__":
    if os.environ.get("BIDE_TEST_GARBLE_AT_START"):
        sys.stdout.buffer.write(b"\xc3\x28 not UTF-8\n")
        sys.stdout.buffer.flush()
        time.sleep(60)
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
