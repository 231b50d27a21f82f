"""Migrations: migrate on open, verify mode, newer schemas, concurrent first open, packaging."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.errors import SchemaError
from runtime.journal import SQLiteStore
from runtime.store.schema import HEAD_REVISION, VERSION_TABLE
from tests.conftest import ROOT, child_env


def revision(path: Path) -> str | None:
    row = sqlite3.connect(path).execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    return None if row is None else str(row[0])


async def test_opening_a_missing_file_creates_and_migrates_it(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path):
        pass
    assert revision(db_path) == HEAD_REVISION
    mode = sqlite3.connect(db_path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


async def test_opening_an_empty_file_migrates_it(db_path: Path) -> None:
    db_path.write_bytes(b"")
    async with await SQLiteStore.open(db_path) as store:
        assert await store.create_run("r")
    assert revision(db_path) == HEAD_REVISION


async def test_verify_mode_refuses_a_missing_file_without_creating_it(db_path: Path) -> None:
    with pytest.raises(SchemaError, match=f"needs schema revision {HEAD_REVISION}"):
        await SQLiteStore.open(db_path, migrate=False)
    assert not db_path.exists()


async def test_verify_mode_refuses_a_file_without_schema_naming_both_revisions(
    db_path: Path,
) -> None:
    sqlite3.connect(db_path).execute("CREATE TABLE unrelated (x)").connection.commit()
    with pytest.raises(SchemaError, match=f"no bide schema.*needs revision {HEAD_REVISION}"):
        await SQLiteStore.open(db_path, migrate=False)


async def test_verify_mode_refuses_an_old_schema_naming_both_revisions(db_path: Path) -> None:
    raw = sqlite3.connect(db_path)
    raw.execute(f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL)")
    raw.execute(f"INSERT INTO {VERSION_TABLE} VALUES ('0000')")
    raw.commit()
    # An unknown *older* id cannot be told from a newer one by name alone; alembic does not
    # know it, so it is refused as foreign either way, with both revisions named.
    with pytest.raises(SchemaError, match=f"0000.*{HEAD_REVISION}"):
        await SQLiteStore.open(db_path, migrate=False)


async def test_verify_mode_opens_a_migrated_file(db_path: Path) -> None:
    async with await SQLiteStore.open(db_path) as store:
        await store.create_run("r")
    async with await SQLiteStore.open(db_path, migrate=False) as store:
        assert [r.key for r in await store.load("r")] == ["header"]


@pytest.mark.parametrize("migrate", [True, False])
async def test_a_schema_from_a_newer_bide_is_refused(db_path: Path, migrate: bool) -> None:
    async with await SQLiteStore.open(db_path):
        pass
    raw = sqlite3.connect(db_path)
    raw.execute(f"UPDATE {VERSION_TABLE} SET version_num = '0099'")
    raw.commit()
    with pytest.raises(SchemaError, match="newer bide"):
        await SQLiteStore.open(db_path, migrate=migrate)
    assert revision(db_path) == "0099"


def test_several_processes_opening_one_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    code = (
        "import asyncio, sys\n"
        "from runtime.journal import SQLiteStore\n"
        "async def main():\n"
        "    s = await SQLiteStore.open(sys.argv[1])\n"
        "    await s.create_run(sys.argv[2])\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), f"run-{i}"],
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    errors = [c.communicate(timeout=60)[1] for c in children]
    assert [c.returncode for c in children] == [0] * 6, errors
    assert revision(path) == HEAD_REVISION
    runs = sqlite3.connect(path).execute("SELECT count(*) FROM bide_runs").fetchone()[0]
    assert runs == 6


def test_alembic_ini_upgrades_a_journal_for_developers(tmp_path: Path) -> None:
    path = tmp_path / "dev.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-c",
            str(ROOT / "alembic.ini"),
            "-x",
            f"url=sqlite:///{path}",
            "upgrade",
            "head",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert revision(path) == HEAD_REVISION
