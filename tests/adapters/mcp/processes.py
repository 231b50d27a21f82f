"""Real processes for the MCP crash tests: a test server over streamable HTTP that outlives the
hosts, a host (the CLI) to SIGKILL at a moment the server's ledger shows, and the journal after."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import Journal
from tests.conftest import child_env

Serve = Callable[..., tuple[str, Path]]
"""``serve(module, **env)``: start ``tests.adapters.mcp.<module> PORT``; its URL and ledger."""


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    children: list[subprocess.Popen[bytes]] = []

    def start(module: str, **env: str) -> tuple[str, Path]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ledger = tmp_path / "ledger"
        server = subprocess.Popen(
            [sys.executable, "-m", f"tests.adapters.mcp.{module}", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=child_env(LEDGER=str(ledger), **env),
        )
        children.append(server)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {module} server did not start") from None
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}/mcp", ledger

    yield start
    for server in children:
        server.kill()
        server.wait(timeout=10)


def host_process(*argv: str, **env: str) -> subprocess.Popen[str]:
    """``python -m runtime ARGV`` in a new process, left running."""
    return subprocess.Popen(
        [sys.executable, "-m", "runtime", *argv],
        env=child_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def count(ledger: Path, word: str) -> int:
    return sum(1 for line in lines(ledger) if line.split()[0] == word)


def kill_when(host: subprocess.Popen[str], ledger: Path, word: str, times: int = 1) -> None:
    """SIGKILL the host once the server's ledger has ``times`` lines starting with ``word``."""
    deadline = time.monotonic() + 60
    while count(ledger, word) < times:
        if host.poll() is not None:
            raise AssertionError(f"the host ended first: {host.communicate()}")
        if time.monotonic() > deadline:
            host.kill()
            raise AssertionError(f"the server never saw {word!r}: {lines(ledger)}")
        time.sleep(0.02)
    os.kill(host.pid, signal.SIGKILL)
    host.communicate(timeout=30)
    assert host.returncode == -signal.SIGKILL


def load_state(db: Path) -> Any:
    async def load() -> Any:
        async with Journal(db) as journal:
            return await journal.require("r")

    return asyncio.run(load())
