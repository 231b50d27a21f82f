"""A journal holding runs in every status, made by real agents, and the console serving it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from runtime.cli import main
from runtime.journal import Journal
from tests.conftest import child_env

T = TypeVar("T")

TOKEN = "console-test-token-0123456789"
OPERATOR = "alice"

RUNS = {
    "done-1": "tests.cli.agents:agent",
    "fail-1": "tests.cli.agents:model_rejects",
    "budget-1": "tests.cli.agents:one_turn_budget",
    "hostile-1": "tests.console.agents:hostile",
    "halt-web": "tests.cli.agents:halting",
    "halt-cli": "tests.cli.agents:halting",
    "halt-refuse": "tests.cli.agents:halting",
    "halt-csrf": "tests.cli.agents:halting",
    "gate-web-yes": "tests.cli.agents:gated",
    "gate-web-no": "tests.cli.agents:gated",
    "gate-cli-yes": "tests.cli.agents:gated",
    "gate-cli-no": "tests.cli.agents:gated",
    "gate-web-cancel": "tests.cli.agents:gated",
    "gate-cli-cancel": "tests.cli.agents:gated",
    "gate-cancelled": "tests.cli.agents:gated",
    "ask-web": "tests.cli.agents:asking",
    "ask-cli": "tests.cli.agents:asking",
    "signal-web": "tests.cli.agents:receiving",
    "signal-cli": "tests.cli.agents:receiving",
}
"""Each run the journal holds, by the agent that made it. ``*-web`` runs are settled through the
console, their ``*-cli`` twins through the CLI, so the two journals can be compared."""


def off_loop(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own: the browser's driver runs an event loop in this one, and
    the CLI and the journal need their own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def cli(*argv: str) -> int:
    """The CLI in this process (in a thread of its own), quietly."""
    return off_loop(lambda: main(["-q", *argv]))


def build_journal(db: Path) -> None:
    for run_id, spec in RUNS.items():
        cli("--db", str(db), "run", "--run-id", run_id, "--agent", spec, "go")
    assert cli("--db", str(db), "cancel", "gate-cancelled", "--by", "bob") == 0


def records(db: Path, run_id: str) -> list[tuple[str, str, Any]]:
    """The run's records as (key, kind, payload), in commit order."""

    async def read() -> list[tuple[str, str, Any]]:
        async with Journal(db, migrate=False) as journal:
            state = await journal.require(run_id)
        ordered = sorted(state.records, key=lambda r: r.seq)
        return [(r.key, r.kind, r.payload) for r in ordered]

    return off_loop(lambda: asyncio.run(read()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Served:
    """The console in a child process: its address, token and journal."""

    url: str
    token: str
    db: Path
    process: subprocess.Popen[str]


@contextlib.contextmanager
def serve(db: Path, *args: str, **env: str) -> Iterator[Served]:
    """``python -m runtime console`` on a free loopback port, stopped (SIGTERM) on exit."""
    port = free_port()
    # Its progress lines go to a file: a pipe nobody reads could fill up and stall it.
    with tempfile.TemporaryFile("w+") as log:
        command = [sys.executable, "-m", "runtime", "--db", str(db), "console"]
        process = subprocess.Popen(
            [*command, "--port", str(port), *args],
            env=child_env(**env),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise AssertionError(f"the console exited {process.returncode}: {log.read()}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), 0.2),
                ):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError("the console did not listen within 20 s")
                time.sleep(0.05)
            token = env.get("BIDE_CONSOLE_TOKEN", "")
            yield Served(f"http://127.0.0.1:{port}/", token, db, process)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            if process.stdout:
                process.stdout.close()


SIGNED = "signed-1"
"""A run waiting at a 2-of-3 signed gate (approvers alice, bob and carol; keys in ``keys``)."""


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Key pairs for the signed gate's approvers, named in $BIDE_TEST_APPROVERS meanwhile."""
    where = tmp_path_factory.mktemp("keys")
    made = {name: where / f"{name}.pem" for name in ("alice", "bob", "carol")}
    for path in made.values():
        assert cli("keygen", "--out", str(path)) == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BIDE_TEST_APPROVERS", ",".join(f"{n}={p}.pub" for n, p in made.items()))
        yield made


@pytest.fixture(scope="module")
def console_db(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Path:
    db = tmp_path_factory.mktemp("console") / "bide.db"
    build_journal(db)
    spec = "tests.cli.agents:signed_gate"
    assert cli("--db", str(db), "run", "--run-id", SIGNED, "--agent", spec, "go") == 3
    return db


@pytest.fixture(scope="module")
def served(console_db: Path) -> Iterator[Served]:
    with serve(console_db, "--operator", OPERATOR, BIDE_CONSOLE_TOKEN=TOKEN) as s:
        yield s


def chromium() -> str | None:
    """Debian's chromium, where it is installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
