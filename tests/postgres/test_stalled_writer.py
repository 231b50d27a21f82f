"""A process stalled inside its write transaction (SIGSTOPped while it holds the journal's write
lock) does not hold every other process's writes for as long as it stalls: the server ends its
session once it has sat idle in the transaction for ``STALLED_TRANSACTION_S``, its batch fails,
and the others' writes go on."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from runtime.store.postgres import PostgresStore
from runtime.store.postgres.connect import STALLED_TRANSACTION_S
from tests.conftest import child_env

STALLING_WRITER = """
import asyncio, sys
from runtime import faults
from runtime.store.postgres import PostgresStore, connect

connect.STALLED_TRANSACTION_S = 2.0  # this writer's sessions; the default is checked apart

async def main():
    store = await PostgresStore.open(sys.argv[1])
    await store.create_run("held")
    faults.arm("write.before_commit@1:stop")  # SIGSTOP inside the batch, the lock held
    try:
        await store.append("held", "k", "note", {"n": 1})
        print("committed")
    except Exception as exc:
        print("failed:", type(exc).__name__)
    await store.close()

asyncio.run(main())
"""


def state(pid: int) -> str:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0]


@pytest.fixture
def stalled_writer(pg_url: str) -> Iterator[subprocess.Popen[str]]:
    """A bide process stopped in the middle of a write batch, holding the write lock."""
    process = subprocess.Popen(
        [sys.executable, "-c", STALLING_WRITER, pg_url],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while state(process.pid) != "T":
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the writer never stopped in its batch"
            time.sleep(0.05)
        yield process
    finally:
        process.send_signal(signal.SIGCONT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_a_writer_stalled_mid_batch_holds_no_other_process_past_its_limit(
    pg_url: str, stalled_writer: subprocess.Popen[str]
) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        # Before the limit, this waited on the stalled batch's lock for as long as it stalled.
        async with asyncio.timeout(60):
            assert await store.create_run("other")
            assert (await store.append("other", "k", "note", {"n": 2})).won
    finally:
        stalled_writer.send_signal(signal.SIGCONT)  # else a close waits on its lock too
        await store.close()
    out, err = stalled_writer.communicate(timeout=30)
    assert out == "failed: StorageError\n", err[-3000:]
    store = await PostgresStore.open(pg_url)
    try:
        assert [r.key for r in await store.load("held")] == ["header"]  # nothing of its batch
    finally:
        await store.close()


async def test_bide_sessions_ask_the_server_to_end_a_stalled_transaction(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        rows = await store._fetch(sa.text("SHOW idle_in_transaction_session_timeout"), {})
    finally:
        await store.close()
    assert [tuple(r) for r in rows] == [(f"{int(STALLED_TRANSACTION_S)}s",)]
