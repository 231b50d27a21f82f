"""A journal URL naming several servers (as libpq and ``pg_autoctl show uri`` write it) reaches
the one that answers as asked, for the writer, the reads and the listening connection alike;
a malformed list is refused before anything connects."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from runtime import Journal
from runtime.errors import ConfigError
from runtime.store.postgres.connect import asyncpg_args, display, postgres_url
from tests.cli import owned


def test_a_host_list_becomes_one_host_option_per_server_in_order() -> None:
    url = postgres_url(
        "postgresql://ann:secret@db1:6001,db2,10.0.0.3:6003/jobs"
        "?target_session_attrs=read-write&sslmode=prefer"
    )
    args = asyncpg_args(url)
    assert args["host"] == ["db1", "db2", "10.0.0.3"]
    assert args["port"] == [6001, 5432, 6003]
    assert (args["user"], args["password"], args["database"]) == ("ann", "secret", "jobs")
    assert args["target_session_attrs"] == "read-write"
    assert args["ssl"] == "prefer"  # libpq's sslmode, under asyncpg's name
    assert "secret" not in display(url)


def test_a_single_host_url_is_left_as_it_was() -> None:
    url = postgres_url("postgresql://ann@db1:6001/jobs")
    assert (url.host, url.port, url.database) == ("db1", 6001, "jobs")
    assert asyncpg_args(url)["host"] == "db1"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("postgresql://u@a:1,b:x/db", "'b:x'"),
        ("postgresql://u@a:1,b:70000/db", "port out of range"),
        ("postgresql://u@a:1,,b/db", "''"),
        ("postgresql://u@a:1,b:2/db?host=c", "not both"),
        ("postgresql://u@a:1,b:2/db?target_session_attrs=primary-ish", "target_session_attrs"),
        ("postgresql://u@a:1/db?sslmode=require&ssl=require", "sslmode or ssl"),
        ("postgresql://u@a:notaport/db", "invalid journal URL"),
    ],
)
def test_a_malformed_server_list_is_refused_naming_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        postgres_url(text)


def _dead_first(url: str) -> str:
    """``url`` behind a server that refuses every connection (a closed port), listed first."""
    parsed = sa.engine.make_url(url)
    rest = parsed.render_as_string(False).split("@", 1)[1].split("/", 1)[1]
    user = parsed.username or "postgres"
    return (
        f"postgresql://{user}@127.0.0.1:1,{parsed.host}:{parsed.port or 5432}/{rest}"
        "?target_session_attrs=read-write"
    )


async def test_a_run_and_its_wakeups_go_through_the_server_that_answers(pg_url: str) -> None:
    url = _dead_first(pg_url)
    async with Journal(url) as journal:
        listening = journal.store.wakeups()  # type: ignore[attr-defined]
        assert await asyncio.wait_for(anext(listening), 30) is None  # connected
        await owned.payments.submit("m1", "go", journal=journal, spec="tests.cli.owned:payments")
        assert await asyncio.wait_for(anext(listening), 30) == "m1"
        await listening.aclose()
        row = await journal.run_row("m1")
        assert row is not None and row.status == "submitted"


async def test_a_write_refused_as_read_only_replaces_the_connection(pg_url: str) -> None:
    """A server that turned read-only under the writer's connection (a demoted primary) fails
    the batch as transient, and once a writable server answers, the next write goes through on
    a new connection instead of being refused on the old one forever."""
    import asyncpg

    from runtime.errors import StorageError
    from runtime.store.postgres import PostgresStore

    database = sa.engine.make_url(pg_url).database
    admin = await asyncpg.connect(pg_url)
    store = await PostgresStore.open(pg_url)
    try:
        await store.create_run("ro-1")
        # New sessions of this database are read-only; the writer's session is cut, so the
        # one it makes next is one of them.
        await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid()"
        )
        with pytest.raises(StorageError) as refused:
            await store.append("ro-1", "k1", "note", {"n": 1})
        assert refused.value.transient, refused.value
        assert "read-only" in str(refused.value)
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        appended = await store.append("ro-1", "k2", "note", {"n": 2})
        assert appended.won
        assert [r.key for r in await store.load("ro-1")] == ["header", "k2"]
    finally:
        await store.close()
        await admin.close()
