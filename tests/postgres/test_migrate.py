"""The schema on PostgreSQL: one Alembic history creates and upgrades it, concurrent first opens
take turns, and a database from a newer bide, or another program's, is refused."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from runtime.errors import SchemaError
from runtime.journal import Journal
from runtime.store.migrate import script_location
from runtime.store.postgres import PostgresStore
from runtime.store.postgres.connect import make_engine, postgres_url
from runtime.store.schema import HEAD_REVISION, VERSION_TABLE
from tests.conftest import ROOT, child_env


async def sql(url: str, statement: str) -> list[tuple[object, ...]]:
    engine = make_engine(postgres_url(url), pool_size=1)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(statement))
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        await engine.dispose()


async def upgrade_to(url: str, revision: str) -> None:
    def go(conn: sa.Connection) -> None:
        config = Config()
        config.set_main_option("script_location", script_location())
        config.attributes["connection"] = conn
        command.upgrade(config, revision)

    engine = make_engine(postgres_url(url), pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(go)
    finally:
        await engine.dispose()


async def test_opening_an_empty_database_creates_the_schema_at_head(pg_empty: str) -> None:
    async with await PostgresStore.open(pg_empty) as store:
        assert await store.create_run("r")
    assert await sql(pg_empty, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD_REVISION,)]
    tables = await sql(
        pg_empty,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
        "ORDER BY table_name",
    )
    assert [t[0] for t in tables] == [
        "bide_alembic_version",
        "bide_leases",
        "bide_queue_runs",
        "bide_queues",
        "bide_records",
        "bide_runs",
        "bide_schedules",
    ]
    types = await sql(
        pg_empty,
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'bide_records' AND column_name = 'seq'",
    )
    assert types == [("bigint",)]


async def test_verify_mode_refuses_a_database_without_the_schema_and_creates_nothing(
    pg_empty: str,
) -> None:
    with pytest.raises(SchemaError, match=f"no bide schema.*needs revision {HEAD_REVISION}"):
        await PostgresStore.open(pg_empty, migrate=False)
    assert await sql(pg_empty, "SELECT to_regclass('bide_records')") == [(None,)]


async def test_a_database_at_an_older_revision_is_upgraded_keeping_its_records(
    pg_empty: str,
) -> None:
    await upgrade_to(pg_empty, "0001")
    await sql(
        pg_empty,
        "INSERT INTO bide_records (seq, run_id, key, kind, codec, payload, created_ms) "
        """VALUES (1, 'old', 'header', 'header', 'json', '{"format": 1}', 0)""",
    )
    await sql(
        pg_empty,
        "INSERT INTO bide_runs (run_id, format, created_ms, updated_ms, status) "
        "VALUES ('old', 1, 0, 0, 'running')",
    )
    with pytest.raises(
        SchemaError, match=f"revision 0001; this bide needs revision {HEAD_REVISION}"
    ):
        await PostgresStore.open(pg_empty, migrate=False)
    async with await PostgresStore.open(pg_empty) as store:
        assert [r.key for r in await store.load("old")] == ["header"]
        appended = await store.append("old", "k", "t", 1)
        assert appended.record is not None and appended.record.seq == 2
        assert await store.lease("old") is None  # bide_leases came with 0002
    assert await sql(pg_empty, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD_REVISION,)]


@pytest.mark.parametrize("migrate", [True, False])
async def test_a_database_written_by_a_newer_bide_is_refused(pg_url: str, migrate: bool) -> None:
    await sql(pg_url, f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    with pytest.raises(SchemaError, match="revision 9999, written by a newer bide"):
        await PostgresStore.open(pg_url, migrate=migrate)
    assert await sql(pg_url, f"SELECT version_num FROM {VERSION_TABLE}") == [("9999",)]


async def test_another_programs_database_is_refused_unless_shared_on_purpose(
    pg_empty: str,
) -> None:
    await sql(pg_empty, "CREATE TABLE invoices (id int)")
    with pytest.raises(SchemaError, match=r"holds other tables \(invoices\)"):
        await PostgresStore.open(pg_empty)
    assert await sql(pg_empty, "SELECT to_regclass('bide_records')") == [(None,)]
    async with await PostgresStore.open(pg_empty, allow_foreign=True) as store:
        assert await store.create_run("r")


_OPEN = """
import asyncio, sys
from runtime.store.postgres import PostgresStore
async def main():
    print("imported", flush=True)
    sys.stdin.readline()  # all at once, once every child is imported
    async with await PostgresStore.open(sys.argv[1]) as store:
        await store.create_run(sys.argv[2])
asyncio.run(main())
"""


async def test_concurrent_first_opens_from_several_processes_all_succeed(pg_empty: str) -> None:
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _OPEN,
            pg_empty,
            f"r{i}",
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    for c in children:
        assert c.stdout is not None
        await asyncio.wait_for(c.stdout.readline(), 60)
    errors = [(await c.communicate(b"go\n"))[1].decode() for c in children]
    assert [c.returncode for c in children] == [0] * 6, errors
    assert await sql(pg_empty, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD_REVISION,)]
    runs = await sql(pg_empty, "SELECT run_id FROM bide_runs ORDER BY run_id")
    assert runs == [(f"r{i}",) for i in range(6)]


def test_the_migrate_command_creates_and_checks_a_postgresql_journal(pg_empty: str) -> None:
    def migrate(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "runtime", "migrate", "--db", pg_empty, *extra],
            env=child_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    check = migrate("--check")
    assert check.returncode == 2 and "no bide schema" in check.stderr
    done = migrate()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"journal {pg_empty} is at schema revision {HEAD_REVISION}"
    assert migrate("--check").returncode == 0


async def test_a_journal_url_opens_a_postgres_store(pg_url: str) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgresql+asyncpg://")):
        async with Journal(url) as journal:
            assert isinstance(journal.store, PostgresStore)
            assert journal.path == pg_url
