"""An MCP server the tests run as a child process: over stdio, or over HTTP with ``http PORT``.

``die`` records that it ran (in the file named by ``BIDE_TEST_RUNS``) and then kills the process
before answering: a server lost mid-call.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("stdio-test")


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


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
