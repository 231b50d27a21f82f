"""The store's contract: insert-if-absent, commit order, reads beside writes, runs index."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import ConfigError, FormatError, StorageError
from runtime.journal import Entry, SQLiteStore, Store
from runtime.ownership import Owner
from runtime.store.postgres import PostgresStore
from runtime.testing import MemoryStore


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Store]:
    """Each contract test runs against every Store: the SQLite file, the in-memory one and a
    PostgreSQL database."""
    s: Store
    if request.param == "sqlite":
        s = await SQLiteStore.open(db_path)
    elif request.param == "postgres":
        s = await PostgresStore.open(request.getfixturevalue("pg_url"))
    else:
        s = MemoryStore()
    try:
        yield s
    finally:
        await s.close()


async def test_append_inserts_once_and_both_writers_see_the_winner(store: Store) -> None:
    await store.create_run("r")
    first = await store.append("r", "k", "turn", {"n": 1})
    second = await store.append("r", "k", "turn", {"n": 2})
    assert first.won and not second.won
    assert first.record == second.record
    assert second.record is not None and second.record.payload == {"n": 1}


async def test_concurrent_appends_of_one_key_from_many_tasks_have_one_winner(store: Store) -> None:
    await store.create_run("r")
    results = await asyncio.gather(*(store.append("r", "k", "t", {"i": i}) for i in range(200)))
    winners = [r for r in results if r.won]
    assert len(winners) == 1
    assert {r.record.seq for r in results if r.record} == {winners[0].record.seq}  # type: ignore[union-attr]
    assert {r.record.payload["i"] for r in results if r.record} == {
        winners[0].record.payload["i"]  # type: ignore[union-attr]
    }


async def test_concurrent_appends_share_commits(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
        before = store.commits
        await asyncio.gather(*(store.append("r", f"k{i}", "t", i) for i in range(300)))
        assert store.commits - before < 300


async def test_load_returns_commit_order_and_resumes_after_a_position(store: Store) -> None:
    await store.create_run("r")
    seqs = [(await store.append("r", f"k{i}", "t", i)).record.seq for i in range(20)]  # type: ignore[union-attr]
    assert seqs == sorted(seqs)
    records = await store.load("r")
    assert [r.key for r in records] == ["header", *(f"k{i}" for i in range(20))]
    assert [r.seq for r in records] == sorted(r.seq for r in records)
    later = await store.load("r", after=seqs[9])
    assert [r.payload for r in later] == list(range(10, 20))


async def test_concurrently_appended_records_load_in_the_order_they_committed(
    store: Store,
) -> None:
    await store.create_run("r")
    results = await asyncio.gather(*(store.append("r", f"k{i}", "t", i) for i in range(100)))
    by_seq = sorted(results, key=lambda a: a.record.seq)  # type: ignore[union-attr]
    loaded = [r.key for r in await store.load("r") if r.key != "header"]
    assert loaded == [a.record.key for a in by_seq]  # type: ignore[union-attr]


async def test_records_carry_kind_codec_and_epoch_ms(store: Store) -> None:
    before = time.time_ns() // 1_000_000
    await store.create_run("r")
    appended = await store.append("r", "k", "result", {"value": [1, "two", None]})
    got = await store.get("r", "k")
    assert got == appended.record
    assert got is not None and got.kind == "result" and got.codec == "json"
    assert before <= got.created_ms <= time.time_ns() // 1_000_000
    assert await store.get("r", "missing") is None


async def test_unless_guard_refuses_the_insert_when_its_key_exists(store: Store) -> None:
    await store.create_run("r")
    free = await store.append("r", "a", "attempt", 1, unless="cancel")
    await store.append("r", "cancel", "cancel", {})
    blocked = await store.append("r", "b", "attempt", 2, unless="cancel")
    assert free.won and free.record is not None
    assert not blocked.won and blocked.record is None
    assert await store.get("r", "b") is None


async def test_records_written_ahead_commit_first_in_one_transaction(store: Store) -> None:
    await store.create_run("r")
    commits = store.commits
    ahead = [Entry("turn/1", "turn", {"n": 1}), Entry("note", "note", [1, 2])]
    appended = await store.append("r", "result/c1/1", "result", {"v": 3}, before=ahead)
    assert store.commits == commits + 1
    assert appended.won and appended.record is not None
    assert [(r.key, r.kind, r.payload) for r in appended.before] == [
        ("turn/1", "turn", {"n": 1}),
        ("note", "note", [1, 2]),
    ]
    records = await store.load("r")
    assert [r.key for r in records] == ["header", "turn/1", "note", "result/c1/1"]
    assert records[1:] == [*appended.before, appended.record]
    assert [r.seq for r in records[1:]] == list(range(records[1].seq, records[1].seq + 3))


async def test_a_guard_refuses_the_records_written_ahead_too(store: Store) -> None:
    await store.create_run("r")
    await store.append("r", "cancel", "cancel", {})
    refused = await store.append(
        "r", "attempt/c1/1", "attempt", {}, unless="cancel", before=[Entry("turn/1", "turn", {})]
    )
    assert refused.record is None and refused.before == () and refused.refused_by == "cancel"
    assert [r.key for r in await store.load("r")] == ["header", "cancel"]


@pytest.mark.parametrize("taken", ["turn/1", "result/c1/1"])
async def test_an_append_whose_records_written_ahead_exist_fails_and_writes_nothing(
    store: Store, taken: str
) -> None:
    """Of two writers of one key, the loser learns the winner; a writer whose records written
    ahead meet another writer's is told so, and none of them is written: its turn and its result
    would not belong together."""
    await store.create_run("r")
    await store.append("r", taken, "turn", {"by": "another"})
    with pytest.raises(StorageError, match="written ahead"):
        await store.append(
            "r", "result/c1/1", "result", {}, before=[Entry("turn/1", "turn", {"by": "me"})]
        )
    assert [(r.key, r.payload) for r in await store.load("r")] == [
        ("header", {"format": 1}),
        (taken, {"by": "another"}),
    ]


async def test_load_by_key_prefix_returns_those_records_in_commit_order(store: Store) -> None:
    await store.create_run("r")
    await store.create_run("r2")
    for key in ("history/2", "turn/1", "history/1", "historyx", "history", "history/"):
        await store.append("r", key, "t", key)
    await store.append("r2", "history/1", "t", "other run")
    got = await store.load("r", prefix="history/")
    assert [r.key for r in got] == ["history/2", "history/1", "history/"]
    later = await store.load("r", prefix="history/", after=got[0].seq)
    assert [r.key for r in later] == ["history/1", "history/"]
    assert await store.load("r", prefix="nothing/") == []
    with pytest.raises(ConfigError, match="prefix"):
        await store.load("r", prefix="")


async def test_watch_reports_a_key_present_at_commit(store: Store) -> None:
    await store.create_run("r")
    assert not (await store.append("r", "a", "t", 1, watch="cancel")).watched
    await store.append("r", "cancel", "cancel", {})
    assert (await store.append("r", "b", "t", 2, watch="cancel")).watched


async def test_a_payload_that_is_not_json_is_refused_before_anything_is_written(
    store: Store,
) -> None:
    await store.create_run("r")
    with pytest.raises(StorageError, match="JSON"):
        await store.append("r", "k", "t", {"x": float("nan")})
    with pytest.raises(StorageError, match="JSON"):
        await store.append("r", "k", "t", {"x": object()})
    assert await store.get("r", "k") is None


async def test_append_to_a_run_without_header_is_refused(store: Store) -> None:
    with pytest.raises(FormatError, match="no header"):
        await store.append("ghost", "k", "t", 1)
    assert await store.load("ghost") == []


async def test_an_unknown_run_format_is_refused_before_anything_is_read_or_written(
    db_path: Path,
) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("fine")
    raw = sqlite3.connect(db_path)
    raw.execute(
        "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
        "VALUES ('future', 'header', 'header', 'json', '{\"format\": 99}', 0)"
    )
    raw.execute(
        "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
        "VALUES ('future', 'turn/1', 'turn', 'json', 'not json at all', 0)"
    )
    raw.commit()
    count = raw.execute("SELECT count(*) FROM bide_records").fetchone()[0]
    async with await SQLiteStore.open(db_path) as store:
        with pytest.raises(FormatError, match="format 99"):
            await store.load("future")
        with pytest.raises(FormatError, match="format 99"):
            await store.get("future", "turn/1")
        with pytest.raises(FormatError, match="format 99"):
            await store.append("future", "x", "t", 1)
        with pytest.raises(FormatError, match="format 99"):
            await store.create_run("future")
        # Other runs sharing the file are unaffected, even in the same group commit.
        await asyncio.gather(
            store.append("fine", "ok", "t", 1),
            asyncio.gather(store.append("future", "y", "t", 1), return_exceptions=True),
        )
        assert (await store.get("fine", "ok")) is not None
    assert raw.execute("SELECT count(*) FROM bide_records").fetchone()[0] == count + 1


async def test_a_record_in_an_unknown_codec_is_refused(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
    raw = sqlite3.connect(db_path)
    raw.execute(
        "INSERT INTO bide_records (run_id, key, kind, codec, payload, created_ms) "
        "VALUES ('r', 'k', 't', 'msgpack', 'xx', 0)"
    )
    raw.commit()
    async with await SQLiteStore.open(db_path) as store:
        with pytest.raises(FormatError, match="msgpack"):
            await store.load("r")


async def test_list_runs_newest_first_filtered_and_paginated(store: Store) -> None:
    for i in range(7):
        await store.create_run(f"job-{i}", agent="a")
        await asyncio.sleep(0.002)
    await store.create_run("other")
    await store.update_index("job-3", status="halted", turns=2, detail={"call_id": "c1"})
    page = await store.list_runs(limit=3)
    assert [r.run_id for r in page.runs] == ["other", "job-6", "job-5"]
    page2 = await store.list_runs(limit=3, before=page.next_cursor)
    assert [r.run_id for r in page2.runs] == ["job-4", "job-3", "job-2"]
    page3 = await store.list_runs(limit=3, before=page2.next_cursor)
    assert [r.run_id for r in page3.runs] == ["job-1", "job-0"]
    assert page3.next_cursor is None
    halted = await store.list_runs(status="halted")
    assert [(r.run_id, r.turns, r.detail) for r in halted.runs] == [("job-3", 2, {"call_id": "c1"})]
    assert [r.run_id for r in (await store.list_runs(prefix="oth")).runs] == ["other"]
    assert (await store.list_runs(prefix="job_")).runs == []  # '_' is not a wildcard
    with pytest.raises(ConfigError):
        await store.list_runs(before="garbage")


async def test_reads_do_not_wait_for_a_held_write_lock(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
        await store.append("r", "k", "t", 1)
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            records = await asyncio.wait_for(store.load("r"), timeout=5)
            assert [r.key for r in records] == ["header", "k"]
            assert time.monotonic() - started < 2
        finally:
            blocker.execute("ROLLBACK")


async def test_a_lock_outlasting_the_busy_timeout_is_a_storage_error_naming_the_file(
    db_path: Path,
) -> None:
    async with await SQLiteStore.open(db_path, busy_timeout_ms=200) as store:
        await store.create_run("r")
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageError, match="locked") as info:
                await store.append("r", "k", "t", 1)
            assert str(db_path) in str(info.value)
        finally:
            blocker.execute("ROLLBACK")
        assert await store.get("r", "k") is None
        assert (await store.append("r", "k", "t", 1)).won


async def test_appends_after_close_are_refused(db_path: Path) -> None:
    store = await SQLiteStore.open(db_path)
    await store.create_run("r")
    await store.close()
    with pytest.raises(StorageError, match="closed"):
        await store.append("r", "k", "t", 1)


@pytest.mark.parametrize(
    "url",
    ["sqlite+aiosqlite:///{p}", "sqlite:///{p}", "{p}"],
)
async def test_open_accepts_a_url_or_a_bare_path(tmp_path: Path, url: str) -> None:
    path = tmp_path / "j.db"
    async with await SQLiteStore.open(url.format(p=path)) as store:
        assert await store.create_run("r")
    assert path.exists()


@pytest.mark.parametrize("url", [":memory:", "sqlite://", "postgresql://x/y", "mysql://a/b"])
async def test_open_refuses_what_is_not_a_sqlite_file(url: str) -> None:
    with pytest.raises(ConfigError):
        await SQLiteStore.open(url)


async def test_run_row_finds_a_run_among_many_that_share_its_prefix(store: Store) -> None:
    await store.create_run("r", agent="a")
    for i in range(60):
        await store.create_run(f"r{i:02d}")
    row = await store.run_row("r")
    assert row is not None and row.run_id == "r" and row.agent == "a"
    assert await store.run_row("nope") is None


async def test_an_index_update_guarded_by_a_key_changes_nothing_once_that_key_exists(
    store: Store,
) -> None:
    await store.create_run("r")
    await store.update_index("r", unless="end", status="halted")
    assert (await store.run_row("r")).status == "halted"  # type: ignore[union-attr]
    await store.append("r", "end", "end", {"status": "completed"}, index={"status": "completed"})
    await store.update_index("r", unless="end", status="halted", detail={"x": 1})
    row = await store.run_row("r")
    assert row is not None and (row.status, row.detail) == ("completed", None)


async def test_an_unchanged_status_is_not_written_again_and_a_changed_one_clears_the_wait(
    db_path: Path,
) -> None:
    """SQLite writes a run's status and its wait's columns (indexed) only where one changes: a
    turn that says "running" again rewrites no index page; a new status sets them all."""
    from runtime.store.sqlite import batch

    async with await SQLiteStore.open(db_path) as store:
        lease = await store.acquire("r", Owner.here(), ttl=15)
        await store.create_run("r", epoch=lease.epoch)
        await store.update_index("r", epoch=lease.epoch, status="waiting", due_ms=5, wake_seq=1)
        conn = sqlite3.connect(db_path)
        try:
            row = "SELECT status, due_ms, due_clock IS NOT NULL, wake_seq FROM bide_runs"
            assert conn.execute(row).fetchone() == ("waiting", 5, True, 1)
            if not batch.UPDATE_FROM:
                pytest.skip("this SQLite has no UPDATE ... FROM: one statement sets every column")
            mask = sum(batch._MASK[c] for c in batch._STOP_COLUMNS)
            same = [
                "r",
                mask,
                "waiting",
                5,
                conn.execute("SELECT due_clock FROM bide_runs").fetchone()[0],
                1,
            ]
            before = conn.total_changes
            conn.execute(batch.update_stop_sql(1), same)
            assert conn.total_changes == before  # the same values: no row written
            conn.execute(batch.update_stop_sql(1), [*same[:3], 6, *same[4:]])
            assert conn.total_changes == before + 1
            conn.rollback()
        finally:
            conn.close()
        await store.update_index("r", epoch=lease.epoch, status="running")
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute(row).fetchone() == ("running", None, False, None)
        finally:
            conn.close()
