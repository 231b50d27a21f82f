"""Fixtures for the MCP adapter's tests: the test server in a child process, over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.adapters.mcp.kit import STDIO_SERVER
from tests.adapters.mcp.processes import serve as serve  # a fixture for the process tests


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _serve_http(**env: str) -> Iterator[str]:
    """``stdio_server.py`` over streamable HTTP on a free port; its URL once it accepts."""
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, str(STDIO_SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if child.poll() is not None:
                    raise RuntimeError("the HTTP test server exited") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        child.wait(timeout=10)


@pytest.fixture
def http_server() -> Iterator[str]:
    yield from _serve_http()


@pytest.fixture
def hostile_http_server() -> Iterator[str]:
    """The same server with its misbehaving tools listed too."""
    yield from _serve_http(BIDE_TEST_HOSTILE="1")
