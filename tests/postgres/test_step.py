"""One step on PostgreSQL: the round trips a batch of appends costs, and the write lock that
makes two writers of one journal agree on each key's winner."""

from __future__ import annotations

import asyncio

from runtime.store.postgres import PostgresStore
from tests.postgres.proxy import Proxy


async def test_a_batch_of_plain_appends_is_four_round_trips(pg_url: str) -> None:
    """BEGIN with the write lock, the probe with the transaction's id, the write, COMMIT."""
    async with Proxy() as proxy, await PostgresStore.open(proxy.url(pg_url)) as store:
        await store.create_run("r")
        await store.append("r", "warm", "t", 0)  # statements are prepared on first use
        before, commits = proxy.sends, store.commits
        for i in range(20):
            assert (await store.append("r", f"k{i}", "t", i)).won
        assert store.commits - commits == 20
        assert proxy.sends - before == 4 * 20


async def test_two_writers_racing_for_one_key_agree_on_one_winner(pg_url: str) -> None:
    """Two journals on one database (a connection and a writer each) append the same keys at
    once: each key has one record, which both callers are told of. The probe runs after the
    lock is granted, in a statement of its own, so it sees what the other writer committed
    while this one waited for the lock."""
    async with (
        await PostgresStore.open(pg_url) as one,
        await PostgresStore.open(pg_url) as other,
    ):
        await one.create_run("r")
        for i in range(60):
            a, b = await asyncio.gather(
                one.append("r", f"k{i}", "t", {"by": "one"}),
                other.append("r", f"k{i}", "t", {"by": "other"}),
            )
            assert a.won != b.won, (i, a, b)
            assert a.record == b.record, (i, a, b)
        records = await one.load("r")
        assert [r.key for r in records] == ["header", *(f"k{i}" for i in range(60))]
        seqs = [r.seq for r in records]
        assert seqs == sorted(set(seqs))


def _fatal(code: str, text: str) -> bytes:
    """A server's ErrorResponse message (FATAL, ``code``)."""
    fields = b"".join(
        kind + value.encode() + b"\0"
        for kind, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", code), (b"M", text))
    )
    body = fields + b"\0"
    return b"E" + (len(body) + 4).to_bytes(4, "big") + body


async def test_an_error_the_server_sent_between_batches_does_not_fail_the_next(
    pg_url: str,
) -> None:
    """A server that ends a session says so first, unasked (an administrator's terminate): the
    driver reads it while idle and can run nothing more on that connection. The writer's next
    batch, which had not reached a transaction, goes through on a new connection."""
    async with Proxy() as proxy, await PostgresStore.open(proxy.url(pg_url)) as store:
        await store.create_run("r")
        proxy.tell_clients(_fatal("57P01", "terminating connection due to administrator command"))
        await asyncio.sleep(0.2)  # the driver reads it, and the socket stays open
        assert (await store.append("r", "k", "t", 1)).won
        assert [r.key for r in await store.load("r")] == ["header", "k"]
