"""Durability across real processes: SIGKILL never loses what was acknowledged, and several
processes writing one file never yield two winners for one key."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from runtime.journal import SQLiteStore
from tests.conftest import child_env

# A child that appends records and prints "ack <key>" only after each append returned.
WRITER = """
from runtime import faults
faults.arm_from_environment()
import asyncio, sys
from runtime.journal import SQLiteStore

async def main(path, sequential, concurrent):
    store = await SQLiteStore.open(path)
    await store.create_run("r")
    for i in range(sequential):
        await store.append("r", f"s{i}", "t", {"i": i})
        print(f"ack s{i}", flush=True)
    async def one(i):
        await store.append("r", f"c{i}", "t", {"i": i})
        print(f"ack c{i}", flush=True)
    await asyncio.gather(*(one(i) for i in range(concurrent)))
    print("done", flush=True)
    await store.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def spawn_writer(path: Path, sequential: int, concurrent: int, crash: str | None = None):
    env = child_env(**({"BIDE_CRASH": crash} if crash else {}))
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(sequential), str(concurrent)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def keys_in(path: Path) -> set[str]:
    async with await SQLiteStore.open(path) as store:
        return {r.key for r in await store.load("r")}


async def test_a_writer_killed_before_its_commit_loses_the_batch_and_acknowledged_nothing_of_it(
    db_path: Path,
) -> None:
    # Records: header is write 1, s0..s4 are writes 2..6, then 20 concurrent appends share
    # batches. Kill before the commit holding write 8 (a concurrent one).
    child = spawn_writer(db_path, 5, 20, crash="write.before_commit@8")
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, err
    acked = {line.split()[1] for line in out.splitlines() if line.startswith("ack")}
    present = await keys_in(db_path)
    assert {f"s{i}" for i in range(5)} <= acked
    assert acked <= present, "an acknowledged record was lost"
    assert "done" not in out
    lost = {f"c{i}" for i in range(20)} - present
    assert lost, "the batch being committed at the kill should be lost"
    assert not (lost & acked)


async def test_a_writer_killed_after_its_commit_keeps_the_batch_it_never_acknowledged(
    db_path: Path,
) -> None:
    child = spawn_writer(db_path, 3, 0, crash="write.after_commit@3")
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, err
    acked = {line.split()[1] for line in out.splitlines() if line.startswith("ack")}
    present = await keys_in(db_path)
    assert acked == {"s0"}
    assert {"s0", "s1"} <= present  # s1 was committed, then the process died before telling


async def test_everything_acknowledged_survives_sigkill_at_an_arbitrary_moment(
    db_path: Path,
) -> None:
    acked = []
    with spawn_writer(db_path, 100_000, 0) as child:
        assert child.stdout is not None
        for line in child.stdout:
            acked.append(line.split()[1])
            if len(acked) == 300:
                child.send_signal(signal.SIGKILL)
                break
        rest = child.stdout.read()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    acked += [line.split()[1] for line in rest.splitlines() if line.startswith("ack")]
    present = await keys_in(db_path)
    assert set(acked) <= present
    assert len(present) >= 301  # the header and every acknowledged record


RACER = """
import asyncio, json, os, sys
from runtime.journal import SQLiteStore

async def main(path, keys):
    store = await SQLiteStore.open(path)
    await store.create_run("r")
    results = await asyncio.gather(
        *(store.append("r", f"k{i}", "t", {"pid": os.getpid()}) for i in range(keys))
    )
    print(json.dumps([[a.won, a.record.payload["pid"]] for a in results]))
    await store.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def test_several_processes_inserting_the_same_keys_yield_one_winner_per_key(
    db_path: Path,
) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
    keys = 50
    children = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(db_path), str(keys)],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(json.loads(out))
    async with await SQLiteStore.open(db_path) as store:
        stored = {r.key: r.payload["pid"] for r in await store.load("r") if r.key != "header"}
    for i in range(keys):
        seen = [out[i] for out in outputs]
        assert sum(won for won, _ in seen) == 1, f"key k{i}: {seen}"
        assert {pid for _, pid in seen} == {stored[f"k{i}"]}, "a loser saw another winner"


async def test_the_writer_group_commits_many_runs_at_once(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await asyncio.gather(*(store.create_run(f"r{i}") for i in range(200)))
        before = store.commits
        await asyncio.gather(*(store.append(f"r{i}", "k", "t", i) for i in range(200)))
        assert store.commits - before <= 20
        assert len((await store.list_runs(limit=500)).runs) == 200
