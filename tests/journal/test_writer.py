"""The group-commit writer applies a batch set-wise exactly as if its ops ran one by one."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import FormatError, StorageError
from runtime.journal import SQLiteStore
from runtime.store.ops import AppendOp, CreateOp, Failed, IndexOp, Op
from runtime.store.sqlite import batch as W
from runtime.store.sqlite import setup

HEADER = json.dumps({"format": 1})


@pytest.fixture
def conn(db_path: Path) -> Iterator[sqlite3.Connection]:
    async def create() -> None:
        async with await SQLiteStore.open(db_path) as store:
            await store.create_run("r")
            await store.create_run("s")

    asyncio.run(create())
    connection = sqlite3.connect(db_path, isolation_level=None)
    setup.configure(connection)
    yield connection
    connection.close()


def apply(conn: sqlite3.Connection, ops: list[Op], *, limit: int = 250_000) -> list[Any]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        outcomes = W.apply(conn, ops, 1234, limit)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return outcomes


def op(run: str, key: str, **kw: Any) -> AppendOp:
    return AppendOp(run, key, "t", "json", json.dumps(key), **kw)


def keys(conn: sqlite3.Connection, run: str) -> list[str]:
    rows = conn.execute("SELECT key FROM bide_records WHERE run_id = ? ORDER BY seq", (run,))
    return [k for (k,) in rows if k != "header"]


def test_a_guard_sees_only_what_precedes_it_in_the_batch(conn: sqlite3.Connection) -> None:
    out = apply(
        conn,
        [
            op("r", "a", unless=("cancel",), watch="cancel"),
            op("r", "cancel"),
            op("r", "b", unless=("cancel",), watch="cancel"),
            op("s", "c", unless=("cancel",), watch="cancel"),
        ],
    )
    assert [(o[0], len(o) == 7, o[1]) for o in out] == [
        (True, True, False),
        (True, True, False),
        (False, False, True),
        (True, True, False),
    ]
    assert keys(conn, "r") == ["a", "cancel"]
    assert keys(conn, "s") == ["c"]


def test_one_key_twice_in_a_batch_has_one_winner_whom_both_see(conn: sqlite3.Connection) -> None:
    first = AppendOp("r", "k", "t", "json", '"first"')
    second = AppendOp("r", "k", "t", "json", '"second"')
    (won1, _, *row1), (won2, _, *row2) = apply(conn, [first, second])
    assert won1 and not won2
    assert row1 == row2 and row1[3] == '"first"'
    (won3, _, *row3) = apply(conn, [AppendOp("r", "k", "t", "json", '"third"')])[0]
    assert not won3 and row3 == row1


def test_seqs_follow_batch_order_across_chunks_and_padding(conn: sqlite3.Connection) -> None:
    # A limit of 40 parameters makes chunks of 4 record rows: 11 rows = 4 + 4 + 3 (padded to 4).
    ops: list[Op] = [op("r", f"k{i}") for i in range(11)]
    out = apply(conn, ops, limit=40)
    seqs = [o[2] for o in out]
    assert seqs == list(range(seqs[0], seqs[0] + 11))
    assert keys(conn, "r") == [f"k{i}" for i in range(11)]
    stored = conn.execute("SELECT count(*) FROM bide_records WHERE run_id = 'r'").fetchone()[0]
    assert stored == 12  # the header and eleven rows: padding inserted nothing


def test_a_run_created_earlier_in_the_batch_passes_the_header_check(
    conn: sqlite3.Connection,
) -> None:
    out = apply(
        conn,
        [CreateOp("new", HEADER, "a"), op("new", "k", check_header=True)],
    )
    assert out[0] is True and out[1][0] is True
    assert conn.execute("SELECT status FROM bide_runs WHERE run_id = 'new'").fetchone() == (
        "running",
    )


def test_an_op_on_a_bad_run_fails_alone_and_the_rest_commits(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
        "VALUES ('future', 'header', 'header', 'json', '{\"format\": 99}', 0)"
    )
    out = apply(
        conn,
        [
            op("future", "x", check_header=True),
            op("ghost", "x", check_header=True),
            CreateOp("future", HEADER, None),
            IndexOp("r", {"colour": "red"}),
            op("r", "ok"),
        ],
    )
    assert isinstance(out[0], Failed) and isinstance(out[0].error, FormatError)
    assert isinstance(out[1], Failed) and "no header" in str(out[1].error)
    assert isinstance(out[2], Failed) and isinstance(out[2].error, FormatError)
    assert isinstance(out[3], Failed) and isinstance(out[3].error, StorageError)
    assert out[4][0] is True
    assert keys(conn, "future") == [] and keys(conn, "r") == ["ok"]


@pytest.mark.parametrize("update_from", [True, False])
def test_index_fields_take_the_last_value_in_the_batch_and_touch_updated_ms(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch, update_from: bool
) -> None:
    monkeypatch.setattr(W, "UPDATE_FROM", update_from)
    before = conn.execute("SELECT agent FROM bide_runs WHERE run_id = 's'").fetchone()
    apply(
        conn,
        [
            op("r", "t1", index={"turns": 1, "status": "waiting"}),
            IndexOp("r", {"detail": '{"d":1}'}),
            op("r", "t2", index={"turns": 2}),
            op("s", "x"),
            op("r", "refused", unless=("t1",), index={"turns": 99}),
        ],
    )
    row = conn.execute(
        "SELECT status, turns, detail, updated_ms FROM bide_runs WHERE run_id = 'r'"
    ).fetchone()
    assert row == ("waiting", 2, '{"d":1}', 1234)
    s = conn.execute("SELECT agent, turns, updated_ms FROM bide_runs WHERE run_id = 's'").fetchone()
    assert s == (before[0], 0, 1234)


async def test_failures_in_one_group_commit_reach_only_their_callers(store: SQLiteStore) -> None:
    await store.create_run("r")
    bad, good = await asyncio.gather(
        store.update_index("r", colour="red"),
        store.append("r", "k", "t", 1),
        return_exceptions=True,
    )
    assert isinstance(bad, StorageError) and "colour" in str(bad)
    assert not isinstance(good, BaseException) and good.won
