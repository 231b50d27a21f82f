"""The PostgreSQL server the suite runs against, and a fresh database per test on it.

``BIDE_TEST_POSTGRES`` is the server's admin URL (default: the local server, trust auth, as user
``postgres`` on database ``test``). Each test gets a database of its own, copied from a template
that bide migrated once per session, and dropped when the test ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa

ADMIN_URL = os.environ.get("BIDE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

_names = itertools.count()
T = TypeVar("T")


def url_of(database: str) -> str:
    """The URL of ``database`` on the test server, as a user would write it."""
    return sa.engine.make_url(ADMIN_URL).set(database=database).render_as_string(False)


async def _admin(*statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` in a thread of its own: fixtures call it from inside a test's loop."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def admin(*statements: str) -> None:
    """Run statements on the admin database (CREATE/DROP DATABASE)."""
    run(_admin(*statements))


def reachable() -> str | None:
    """None if the server answers, else why not, in one line."""
    try:
        admin("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {url_of('test')} is not reachable: {type(exc).__name__}: {exc}"
    return None


def fresh_name(tag: str) -> str:
    return f"bide_t{os.getpid()}_{tag}_{next(_names)}"


@contextmanager
def database(template: str | None = None) -> Iterator[str]:
    """A new database (empty, or a copy of ``template``) for the block; dropped afterwards."""
    name = fresh_name("db")
    admin(f"CREATE DATABASE {name} TEMPLATE {template or 'template0'}")
    try:
        yield url_of(name)
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
