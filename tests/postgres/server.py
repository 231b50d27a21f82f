"""The PostgreSQL server the suite runs against, and a fresh database per test on it.

``BIDE_TEST_POSTGRES`` is the server's admin URL (default: the local server, trust auth, as user
``postgres`` on database ``test``). Each test gets a database of its own, copied from a template
that bide migrated once per session, and dropped when the test ends (``Copies`` makes them
ahead and drops them behind, off the tests' time).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
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


class Copies:
    """Copies of a template database, each made before a test asks for it and dropped after
    it, by threads of their own while tests run: a CREATE DATABASE takes the server a few hundred
    ms, and the test process needs none of it. A copy is the template as ``database(template)``
    makes it; each is one test's alone."""

    def __init__(self, template: str, *, ahead: int = 3):
        self.template = template
        # Two at a time: the server makes two copies in little more time than one.
        self._thread = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="pg-copies")
        self._made = [self._thread.submit(self._make) for _ in range(ahead)]
        self._dropped: list[concurrent.futures.Future[None]] = []

    def _make(self) -> str:
        name = fresh_name("db")
        admin(f"CREATE DATABASE {name} TEMPLATE {self.template}")
        return name

    @contextmanager
    def database(self) -> Iterator[str]:
        """A copy for the block (the next one is started); dropped in the background after."""
        made = self._made.pop(0)
        self._made.append(self._thread.submit(self._make))
        name = made.result()
        try:
            yield url_of(name)
        finally:
            self._drop(name)

    def _drop(self, name: str) -> None:
        statement = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        self._dropped.append(self._thread.submit(admin, statement))

    def close(self) -> None:
        """Drop the copies no test took; raise if any drop failed (a database was left)."""
        for made in self._made:
            with contextlib.suppress(Exception):  # a copy that failed was a test's error
                self._drop(made.result())
        self._thread.shutdown(wait=True)
        for dropped in self._dropped:
            dropped.result()


@contextmanager
def database(template: str | None = None) -> Iterator[str]:
    """A new database (empty, or a copy of ``template``) for the block; dropped afterwards."""
    name = fresh_name("db")
    admin(f"CREATE DATABASE {name} TEMPLATE {template or 'template0'}")
    try:
        yield url_of(name)
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
