"""Reaching a PostgreSQL journal: its URL, the engine bide opens on it, and what a driver error
means (one line that names the server, never its password)."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

import sqlalchemy as sa

from runtime.errors import ConfigError, StorageError
from runtime.redact import redact
from runtime.store.postgres.hosts import multi_host, session_options

if TYPE_CHECKING:  # the async engine is imported when a PostgreSQL journal opens
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "CONNECT_TIMEOUT",
    "MIGRATE_LOCK",
    "NOW_MS",
    "READY_CHANNEL",
    "RECORDS_CHANNEL",
    "STALLED_TRANSACTION_S",
    "WRITE_LOCK",
    "asyncpg_args",
    "connection_lost",
    "connection_unusable",
    "display",
    "make_engine",
    "postgres_url",
    "sqlstate",
    "storage_error",
]

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the server to accept a connection before saying it cannot be reached."""

STALLED_TRANSACTION_S = 30.0
"""Seconds a session of bide's may sit idle inside a transaction before the server ends it
(``idle_in_transaction_session_timeout``). A batch holds ``WRITE_LOCK`` until it commits, and
every writer of the database waits for it: a process stopped or stalled mid-batch (SIGSTOP, a
paused VM, an event loop blocked by a tool) would hold every other process's writes for as long
as it stalls. Its batch fails instead (nothing of it commits: its callers get a
``StorageError``) and the others go on. Twice a lease's TTL: a writer that stalled this long had
lost its run's lease long before."""

WRITE_LOCK = 0x6269_6465_0000_0001
"""The transaction-scoped advisory lock every write of a journal holds (``pg_advisory_xact_lock``):
a batch decides each key's winner, the next ``seq`` and the fencing epoch from what it reads
under this lock, as SQLite's writer does under its write lock. Holding it until commit also
makes ``seq`` the commit order across processes."""

MIGRATE_LOCK = 0x6269_6465_0000_0002
"""The session advisory lock held around a schema upgrade: concurrent first opens take turns."""

READY_CHANNEL = "bide_ready"
"""The channel a write that makes a run ready to drive ``NOTIFY``s, in its own transaction (so a
notification means committed), with the run's id as payload: workers ``LISTEN`` on it."""

RECORDS_CHANNEL = "bide_records"
"""The channel every write that inserts records ``NOTIFY``s, once per run, in its own transaction
(so a notification means committed), with the run's id as payload: followers of a run's events
``LISTEN`` on it (``runtime.events``)."""


NOW_MS = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint)"
"""The database's clock in epoch milliseconds: leases and records are timed by the server, so
every process and machine sharing the journal agrees on one clock."""


def postgres_url(url: str | os.PathLike[str]) -> sa.URL:
    """The SQLAlchemy URL bide connects with: the same server, database and options, on asyncpg.

    Several servers may be named, as libpq names them (``postgresql://h1:p1,h2:p2/db``, with
    ``?target_session_attrs=read-write`` to reach whichever is the primary): see
    ``runtime.store.postgres.hosts``."""
    text = os.fspath(url)
    if text.lower().startswith("postgres://"):
        text = "postgresql://" + text[len("postgres://") :]
    text = multi_host(text)
    try:
        parsed = sa.engine.make_url(text)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise ConfigError(f"invalid journal URL {text!r}: {exc}") from exc
    parsed = session_options(parsed)
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(f"journal URL {display(parsed)}: not a PostgreSQL URL")
    if parsed.drivername not in ("postgresql", "postgresql+asyncpg"):
        raise ConfigError(
            f"journal URL {display(parsed)}: bide connects to PostgreSQL with asyncpg "
            "(postgresql+asyncpg://... or postgresql://...)"
        )
    if not parsed.database:
        raise ConfigError(f"journal URL {display(parsed)} names no database (.../dbname)")
    return parsed.set(drivername="postgresql+asyncpg")


def asyncpg_args(url: sa.URL) -> dict[str, object]:
    """The keyword arguments ``asyncpg.connect`` takes for ``url`` (a ``postgres_url``): its
    hosts and ports (a list of each when it names several), user, password, database and
    options, as the engine's own connections get them."""
    from sqlalchemy.dialects.postgresql.asyncpg import dialect

    _, kwargs = dialect().create_connect_args(url)  # type: ignore[no-untyped-call]
    return dict(kwargs)


def display(url: sa.URL | str) -> str:
    """The URL fit for a message: its password and every secret parameter (``sslpassword``,
    ...), if any, replaced by ``***``."""
    if isinstance(url, str):
        try:
            url = sa.engine.make_url(url)
        except sa.exc.ArgumentError:
            return "<an invalid URL>"
    shown = url.set(drivername=url.get_backend_name()) if url.drivername else url
    base, mark, query = shown.render_as_string(hide_password=True).partition("?")
    return base + mark + redact(mark + query)[1:] if query else base


def make_engine(url: sa.URL, *, pool_size: int = 4) -> AsyncEngine:
    """An async engine on asyncpg whose connections give up after ``CONNECT_TIMEOUT``, and
    whose sessions the server ends after ``STALLED_TRANSACTION_S`` idle in a transaction. (No
    ``pool_pre_ping``: a round trip per read; the store retries a read once instead when the
    server had dropped its pooled connection.)"""
    try:
        import asyncpg  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"journal {display(url)}: PostgreSQL needs asyncpg: pip install 'bide[postgres]'"
        ) from exc
    from sqlalchemy.ext.asyncio import create_async_engine

    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        connect_args={
            "timeout": CONNECT_TIMEOUT,
            "server_settings": {
                "application_name": "bide",
                "idle_in_transaction_session_timeout": str(int(STALLED_TRANSACTION_S * 1000)),
            },
        },
    )


def _root(exc: BaseException) -> BaseException:
    """The driver's own exception under SQLAlchemy's wrappers."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "orig", None) if isinstance(exc, sa.exc.DBAPIError) else None
        if inner is None and exc.__cause__ is not None and _is_wrapper(exc):
            inner = exc.__cause__
        if inner is None:
            break
        exc = inner
    return exc


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of the server's refusal under ``exc``, if it is one."""
    code = getattr(_root(exc), "sqlstate", None)
    return None if code is None else str(code)


def _is_wrapper(exc: BaseException) -> bool:
    # SQLAlchemy's asyncpg adapter re-raises each asyncpg error as a DB-API error of its own.
    return type(exc).__module__.startswith("sqlalchemy")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection to the server broke (as opposed to a refusal)."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    root = _root(exc)
    if isinstance(root, OSError | EOFError | asyncio.TimeoutError | TimeoutError):
        return True
    try:
        import asyncpg
    except ModuleNotFoundError:  # pragma: no cover - the extra is installed with the store
        return False
    return isinstance(
        root,
        asyncpg.exceptions.ConnectionDoesNotExistError
        | asyncpg.exceptions.InterfaceError
        | asyncpg.exceptions.ConnectionFailureError
        | asyncpg.exceptions.AdminShutdownError
        | asyncpg.exceptions.CannotConnectNowError
        # No server named in a multi-host URL is (yet) the primary: a failover under way.
        | asyncpg.exceptions.TargetServerAttributeNotMatched,
    )


def connection_unusable(exc: BaseException) -> bool:
    """Whether the driver refused to run anything more on its connection (asyncpg's
    ``InternalClientError``): it read what it had not asked for, such as the FATAL a server
    sends before it ends a session, and the end of the socket had not yet reached it. Nothing
    of the refused statement was sent; the connection is to be replaced, as a lost one is."""
    try:
        import asyncpg
    except ModuleNotFoundError:  # pragma: no cover - the extra is installed with the store
        return False
    return isinstance(_root(exc), asyncpg.exceptions.InternalClientError)


def storage_error(where: str, exc: BaseException, *, doing: str) -> StorageError:
    """A ``StorageError`` in one line: the server (``where``, redacted), what bide was doing, why.

    A broken connection or a server that cannot be reached is ``transient``.
    """
    if isinstance(exc, StorageError):
        return exc
    root = _root(exc)
    sqlstate = getattr(root, "sqlstate", None)
    if isinstance(root, ConnectionRefusedError):
        why = "connection refused (is the server running, on that host and port?)"
    elif isinstance(root, OSError) and not str(root):
        why = type(root).__name__
    elif isinstance(root, asyncio.TimeoutError | TimeoutError):
        why = f"no answer from the server within {CONNECT_TIMEOUT:g}s"
    elif sqlstate == "3D000":
        why = "no such database (create it first: CREATE DATABASE ...)"
    elif sqlstate in ("28000", "28P01"):
        why = f"the server refused the credentials: {_one_line(root)}"
    else:
        why = _one_line(root) or type(root).__name__
    # 25006: a connection made to a primary that has since become a standby (a failover).
    transient = connection_lost(exc) or sqlstate in ("57P01", "57P03", "53300", "25006")
    error = StorageError(f"journal {where}: {doing}: {why}", transient=transient)
    error.__cause__ = exc
    return error


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
