"""The journal file itself: created private, named exactly, refused when it is not bide's."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from runtime.errors import SchemaError
from runtime.journal import SQLiteStore
from tests.cli.invoke import Cli

RUN = ["run", "-q", "--agent", "tests.cli.agents:agent", "--run-id", "r1", "go"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]


async def test_a_new_journal_and_its_wal_and_shm_files_are_created_0600(db_path: Path) -> None:
    old = os.umask(0o022)
    try:
        async with await SQLiteStore.open(db_path) as store:
            await store.create_run("r")
            wal, shm = Path(f"{db_path}-wal"), Path(f"{db_path}-shm")
            assert (mode(db_path), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
    finally:
        os.umask(old)


def test_run_and_migrate_create_the_journal_0600(cli: Cli, tmp_path: Path) -> None:
    assert cli("--db", str(tmp_path / "run.db"), *RUN).code == 0
    assert cli("migrate", "--db", str(tmp_path / "migrated.db")).code == 0
    assert mode(tmp_path / "run.db") == mode(tmp_path / "migrated.db") == 0o600


def test_an_existing_journal_file_keeps_its_mode(cli: Cli, db_path: Path) -> None:
    db_path.touch()
    db_path.chmod(0o640)
    assert cli("--db", str(db_path), *RUN).code == 0
    assert mode(db_path) == 0o640


@pytest.mark.parametrize("name", ["a%41b.db", "what?x=1.db", "hash#1.db"])
def test_a_plain_path_names_exactly_that_file(cli: Cli, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    done = cli("--db", str(path), *RUN)
    assert done.code == 0, done.err
    assert [p.name for p in tmp_path.iterdir() if p.suffix in (".db", "")] == [name]
    assert "bide_records" in tables(path)
    assert cli("--db", str(path), "list", "--json").json()["runs"][0]["run_id"] == "r1"
    assert cli("--db", str(path), "migrate", "--check").code == 0


@pytest.mark.parametrize("argv", [["list"], ["show", "r1"], RUN, ["migrate"], ["resume", "r1"]])
def test_a_file_that_is_not_sqlite_is_one_error_line_exit_2(
    cli: Cli, db_path: Path, argv: list[str]
) -> None:
    db_path.write_text("name,amount\nann,12\n" * 20)
    done = cli("--db", str(db_path), *argv)
    assert done.code == 2
    assert done.err.splitlines() == [
        f"bide: error: {db_path} is not a bide journal or is damaged "
        "(sqlite: file is not a database)"
    ]
    assert db_path.read_text() == "name,amount\nann,12\n" * 20


def _damage_the_records(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'bide_records'"
        ).fetchone()
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\x0d\x00\xff\xff" + b"\xee" * 300)


@pytest.mark.parametrize("argv", [["show", "r1"], ["resume", "r1"], [*RUN[:-2], "r2", "go"]])
def test_a_damaged_journal_is_reported_as_damaged_exit_2(
    cli: Cli, db_path: Path, argv: list[str]
) -> None:
    assert cli("--db", str(db_path), *RUN).code == 0
    _damage_the_records(db_path)
    done = cli("--db", str(db_path), *argv)
    assert done.code == 2, done.err
    assert done.error_line == (
        f"bide: error: {db_path} is not a bide journal or is damaged "
        "(sqlite: database disk image is malformed)"
    )
    assert "Traceback" not in done.err


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, cents INTEGER)")


def test_a_foreign_sqlite_database_is_refused_and_left_as_it_was(cli: Cli, db_path: Path) -> None:
    _foreign(db_path)
    for argv in (RUN, ["migrate"]):
        done = cli("--db", str(db_path), *argv)
        assert done.code == 2, done.err
        assert done.error_line.startswith(
            f"bide: error: {db_path} is not a bide journal: it holds other tables (invoices)"
        )
        assert "--allow-foreign" in done.error_line
    assert tables(db_path) == ["invoices"]
    check = cli("--db", str(db_path), "migrate", "--check")
    assert check.code == 2 and "another program's database: invoices" in check.error_line


def test_migrate_allow_foreign_shares_the_database_and_runs_then_use_it(
    cli: Cli, db_path: Path
) -> None:
    _foreign(db_path)
    assert cli("--db", str(db_path), "migrate", "--allow-foreign").code == 0
    assert cli("--db", str(db_path), *RUN).code == 0
    assert {"invoices", "bide_records", "bide_runs"} <= set(tables(db_path))


async def test_sqlite_store_open_refuses_a_foreign_database_unless_allow_foreign(
    db_path: Path,
) -> None:
    _foreign(db_path)
    with pytest.raises(SchemaError, match="holds other tables"):
        await SQLiteStore.open(db_path)
    async with await SQLiteStore.open(db_path, allow_foreign=True) as store:
        assert await store.create_run("r")


def test_resume_of_a_run_whose_start_record_is_not_an_object_names_it(
    cli: Cli, db_path: Path
) -> None:
    """A journal another program wrote: resume reads the start record for the agent spec, and
    refuses one that is not an object, naming the run and the record, before driving anything."""
    assert cli("--db", str(db_path), *RUN).code == 0
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE bide_records SET payload = '[1, 2]' WHERE key = 'start'")
    done = cli("--db", str(db_path), "resume", "r1")
    assert done.code == 2, done.err
    assert (
        done.error_line
        == "bide: error: CorruptJournal: run 'r1': its start record is not an object"
    )
    assert "Traceback" not in done.err


@pytest.mark.parametrize(
    "verb",
    [["resume", "r"], ["resolve", "r", "c1", "--not-executed"], ["cancel", "r"], ["show", "r"]],
)
def test_a_record_of_the_wrong_shape_is_a_corrupt_journal_naming_it_exit_2(
    cli: Cli, db_path: Path, verb: list[str]
) -> None:
    """An attempt record without its attempt number (another program wrote it)."""
    halting = ["run", "--agent", "tests.cli.agents:halting", "--run-id", "r", "go"]
    assert cli("--db", str(db_path), *halting).code == 4
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE bide_records SET payload = '{\"call_id\": \"c1\"}' WHERE kind = 'attempt'"
        )
        (key, seq) = conn.execute(
            "SELECT key, seq FROM bide_records WHERE kind = 'attempt'"
        ).fetchone()
    done = cli("--db", str(db_path), *verb)
    assert done.code == 2, done.err
    named = f"record '{key}' of run 'r' (seq {seq}) does not have the shape of a 'attempt' record"
    assert f"{named} (no 'attempt')" in done.error_line
    assert verb[0] == "show" or done.error_line.startswith("bide: error: CorruptJournal: ")
    assert "Traceback" not in done.err
