"""MCP tasks across a SIGKILL: a real host process (the CLI) driving a charge that a real server
process over streamable HTTP answers as a task; the server outlives the host and counts the calls.

Killed once the task id is journaled, a resume in a new process polls the task to its result
and the server saw the call once. Killed after the call left and before the task id arrived, a
resume halts: that window is an unknown outcome.
"""

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
from tests.cli.invoke import child
from tests.conftest import child_env

SPEC = "tests.adapters.mcp.task_agent:charging"

Serve = Callable[..., tuple[str, Path]]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start ``task_server`` over HTTP with the given environment; its URL and its ledger."""
    children: list[subprocess.Popen[bytes]] = []

    def start(**env: str) -> tuple[str, Path]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ledger = tmp_path / "ledger"
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.adapters.mcp.task_server", str(port)],
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
                    raise RuntimeError("the task server did not start") from None
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}/mcp", ledger

    yield start
    for server in children:
        server.kill()
        server.wait(timeout=10)


def _host(db: Path, url: str) -> subprocess.Popen[str]:
    argv = ["run", "--db", str(db), "--agent", SPEC, "--run-id", "r", "go"]
    return subprocess.Popen(
        [sys.executable, "-m", "runtime", *argv],
        env=child_env(TASK_SERVER=url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def _kill_when(host: subprocess.Popen[str], ledger: Path, word: str) -> None:
    """SIGKILL the host once the server's ledger has a line starting with ``word``."""
    deadline = time.monotonic() + 60
    while not any(line.split()[0] == word for line in _lines(ledger)):
        if host.poll() is not None:
            raise AssertionError(f"the host ended first: {host.communicate()}")
        if time.monotonic() > deadline:
            host.kill()
            raise AssertionError(f"the server never saw {word!r}: {_lines(ledger)}")
        time.sleep(0.02)
    os.kill(host.pid, signal.SIGKILL)
    host.communicate(timeout=30)
    assert host.returncode == -signal.SIGKILL


def _state(db: Path) -> Any:
    async def load() -> Any:
        async with Journal(db) as journal:
            return await journal.require("r")

    return asyncio.run(load())


def _calls(ledger: Path) -> int:
    return sum(1 for line in _lines(ledger) if line.split()[0] == "call")


def test_a_host_killed_while_its_task_runs_gets_the_result_by_polling_on_resume(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve(TASK_SECONDS="3", POLL_MS="100")
    host = _host(db, url)
    # The server is polled only after the task id is committed: a poll means it is journaled.
    _kill_when(host, ledger, "get")
    call = _state(db).calls["c1"]
    assert call.handle is not None and call.result is None
    assert call.resumable and not call.halted  # knowable: not halted
    seen = len(_lines(ledger))
    resumed = child("resume", "--db", str(db), "r", TASK_SERVER=url)
    assert (resumed.code, resumed.out) == (0, "charged\n"), resumed.err
    assert _calls(ledger) == 1  # the server saw the call once
    assert any(line.startswith("get ") for line in _lines(ledger)[seen:])  # by polling
    content, is_error = _state(db).calls["c1"].message_content()
    assert not is_error and content[0]["text"] == '{"charged": 5}'


def test_a_host_killed_between_sending_the_call_and_journaling_its_task_id_halts(
    tmp_path: Path, serve: Serve
) -> None:
    db = tmp_path / "bide.db"
    url, ledger = serve(TASK_SECONDS="0", ANSWER_DELAY="30")
    host = _host(db, url)
    _kill_when(host, ledger, "call")  # the server acted; its task id has not reached the host
    call = _state(db).calls["c1"]
    assert call.marker is not None and call.handle is None
    resumed = child("resume", "--db", str(db), "r", TASK_SERVER=url)
    assert resumed.code == 4, resumed.err  # halted: the outcome is unknown
    assert _calls(ledger) == 1  # and never sent again
    assert _state(db).status() == "halted"
