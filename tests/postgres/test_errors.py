"""What goes wrong between bide and PostgreSQL: each a StorageError in one line that names the
server and never its password; a COMMIT whose connection broke is settled before anyone hears."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest
import sqlalchemy as sa

from runtime.errors import StorageError
from runtime.journal import Journal
from runtime.store.postgres import PostgresStore
from tests.conftest import ROOT, child_env
from tests.postgres.proxy import Proxy
from tests.postgres.server import url_of

SECRET = "hunter2-pass"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_password(url: str, user: str) -> str:
    return sa.engine.make_url(url).set(username=user, password=SECRET).render_as_string(False)


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text, text
    assert SECRET not in text, text
    return text


async def test_a_refused_connection_names_the_server(pg_template: str) -> None:
    port = free_port()
    url = f"postgresql://bide:{SECRET}@127.0.0.1:{port}/journal"
    with pytest.raises(StorageError) as caught:
        await PostgresStore.open(url)
    text = one_line(caught.value)
    assert f"postgresql://***@127.0.0.1:{port}/journal" in text
    assert "connection refused" in text
    assert caught.value.transient


async def test_credentials_the_server_refuses_are_a_storage_error_without_the_password(
    pg_template: str,
) -> None:
    url = with_password(url_of("test"), "no_such_role_for_bide")
    with pytest.raises(StorageError) as caught:
        async with Journal(url):
            pass
    text = one_line(caught.value)
    assert "refused the credentials" in text and "no_such_role_for_bide" in text
    assert "127.0.0.1" in text


async def test_a_missing_database_says_so(pg_template: str) -> None:
    url = url_of("no_such_database_for_bide")
    with pytest.raises(StorageError, match="no such database") as caught:
        await PostgresStore.open(url)
    assert "no_such_database_for_bide" in one_line(caught.value)


@pytest.mark.parametrize(
    "secret_in",
    ["userinfo", "sslpassword"],
)
def test_the_cli_prints_one_line_without_the_password(pg_template: str, secret_in: str) -> None:
    """Neither the password nor any other secret parameter of the URL (libpq's
    ``sslpassword``) is printed."""
    port = free_port()
    url = (
        f"postgresql://bide:{SECRET}@127.0.0.1:{port}/journal"
        if secret_in == "userinfo"
        else f"postgresql://bide@127.0.0.1:{port}/journal?sslpassword={SECRET}&sslmode=disable"
    )
    done = subprocess.run(
        [sys.executable, "-m", "runtime", "list", "--db", url],
        env=child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert SECRET not in done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "bide: error: StorageError: journal postgresql://"
    )
    assert "***" in lines[0]


async def test_a_connection_the_server_dropped_between_batches_is_replaced(pg_url: str) -> None:
    async with await PostgresStore.open(pg_url) as store:
        await store.create_run("r")
        assert await store.check_run("r")  # a pooled read connection, to be dropped too
        await _terminate_bide_backends(pg_url)
        assert (await store.append("r", "k", "t", 1)).won
        assert [r.key for r in await store.load("r")] == ["header", "k"]


async def _terminate_bide_backends(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'bide' AND datname = current_database()"
        )
    finally:
        await conn.close()


async def test_a_connection_lost_mid_batch_fails_its_callers_and_commits_nothing(
    pg_url: str,
) -> None:
    async with Proxy() as proxy, await PostgresStore.open(proxy.url(pg_url)) as store:
        await store.create_run("r")
        proxy.refusing = True  # the server is unreachable from now on
        cue = proxy.arm(b"BEGIN", forward=True)
        results = await asyncio.gather(
            *(store.append("r", f"k{i}", "t", i) for i in range(5)), return_exceptions=True
        )
        assert cue.fired.is_set()
        assert all(isinstance(r, StorageError) for r in results), results
        text = one_line(results[0])
        assert f"127.0.0.1:{proxy.port}" in text
        proxy.refusing = False
        assert [r.key for r in await store.load("r")] == ["header"]
        assert (await store.append("r", "k0", "t", "again")).won


async def test_a_commit_that_reached_the_server_is_learned_and_reported_committed(
    pg_url: str,
) -> None:
    async with Proxy() as proxy, await PostgresStore.open(proxy.url(pg_url)) as store:
        await store.create_run("r")
        commits = store.commits
        cue = proxy.arm(b"COMMIT", forward=True)
        results = await asyncio.gather(*(store.append("r", f"k{i}", "t", i) for i in range(5)))
        assert cue.fired.is_set()
        assert all(r.won and r.record is not None for r in results)
        assert store.commits == commits + 1
        loaded = await store.load("r")
        assert [r.key for r in loaded] == ["header", *(f"k{i}" for i in range(5))]
        assert [r.record.seq for r in results if r.record] == [r.seq for r in loaded[1:]]


async def test_a_commit_that_never_reached_the_server_is_learned_and_reported_failed(
    pg_url: str,
) -> None:
    async with Proxy() as proxy, await PostgresStore.open(proxy.url(pg_url)) as store:
        await store.create_run("r")
        cue = proxy.arm(b"COMMIT", forward=False)
        results = await asyncio.gather(
            *(store.append("r", f"k{i}", "t", i) for i in range(5)), return_exceptions=True
        )
        assert cue.fired.is_set()
        assert all(isinstance(r, StorageError) for r in results), results
        assert "server aborted the batch" in one_line(results[0])
        assert [r.key for r in await store.load("r")] == ["header"]


async def test_an_op_the_server_refuses_fails_alone_and_the_rest_of_its_batch_commits(
    pg_url: str,
) -> None:
    """A refusal one op causes (past every check before the writer) costs only that op."""
    from runtime.records import CODEC
    from runtime.store.codec import encode
    from runtime.store.ops import AppendOp

    async with Journal(pg_url) as journal:
        store = journal.store
        assert isinstance(store, PostgresStore)
        for i in range(40):
            await store.create_run(f"r{i}")
        writer = store._writer

        def op(run_id: str, key: str) -> AppendOp:
            return AppendOp(run_id, key, "t", CODEC, encode({"i": key}), check_header=True)

        futures = [writer.submit(op(f"r{i}", "k")) for i in range(40)]
        futures.insert(17, writer.submit(op("r3", "bad\x00key")))
        outcomes = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 30)
        bad = outcomes.pop(17)
        assert isinstance(bad, StorageError) and "0x00" in str(bad), bad
        assert all(isinstance(o, tuple) and o[0] for o in outcomes), outcomes
        for i in range(40):
            assert [r.key for r in await store.load(f"r{i}")] == ["header", "k"]
