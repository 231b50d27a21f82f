"""``migrate``: creates or upgrades the schema; ``--check`` verifies and changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.store.schema import HEAD_REVISION, VERSION_TABLE
from tests.cli.invoke import Cli, child


def revision(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()[0])


def test_migrate_creates_the_journal_at_head_and_check_then_passes(cli: Cli, db_path: Path) -> None:
    done = cli("migrate", "--db", str(db_path))
    assert (done.code, done.out) == (
        0,
        f"journal {db_path} is at schema revision {HEAD_REVISION}\n",
    )
    assert revision(db_path) == HEAD_REVISION
    assert cli("migrate", "--db", str(db_path)).code == 0  # again: nothing to do
    assert cli("migrate", "--db", str(db_path), "--check").code == 0


def test_check_on_a_missing_journal_is_exit_2_and_creates_nothing(cli: Cli, db_path: Path) -> None:
    done = cli("migrate", "--db", str(db_path), "--check")
    assert done.code == 2 and done.error_line.startswith(f"bide: error: no journal at {db_path}")
    assert not db_path.exists()


def test_check_on_a_database_without_bide_schema_is_exit_2(cli: Cli, db_path: Path) -> None:
    sqlite3.connect(db_path).close()
    done = cli("migrate", "--db", f"sqlite+aiosqlite:///{db_path}", "--check")
    assert done.code == 2
    assert "has no bide schema" in done.error_line
    assert cli("migrate", "--db", f"sqlite+aiosqlite:///{db_path}").code == 0
    assert revision(db_path) == HEAD_REVISION


def test_migrate_in_a_child_process(db_path: Path) -> None:
    assert child("migrate", "--db", str(db_path), "--check").code == 2
    done = child("migrate", "--db", str(db_path))
    assert done.code == 0, done.err
    assert child("migrate", "--db", str(db_path), "--check").code == 0
