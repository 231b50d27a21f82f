"""Alembic environment for bide's journal.

bide runs this itself when it opens a journal (the open connection arrives in
``config.attributes["connection"]``); developers run it with ``alembic upgrade head``, optionally
``-x url=sqlite:///path`` or ``-x url=postgresql://user@host/db``.
"""

from __future__ import annotations

from alembic import context

from runtime.store import schema

config = context.config
target_metadata = schema.metadata


def _run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=schema.VERSION_TABLE,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_postgres(url: str) -> None:
    from runtime.store.postgres.connect import make_engine, postgres_url

    engine = make_engine(postgres_url(url), pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def main() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from runtime.store.sqlite.migrate import migration_engine

    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    from runtime.store.urls import is_postgres_url

    if url and is_postgres_url(url):
        import asyncio

        asyncio.run(_run_postgres(url))
        return
    engine = migration_engine(url or "bide.db")
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("bide's migrations run online only: alembic upgrade head")
main()
