"""Alembic environment for bide's journal.

bide runs this itself when it opens a journal (the open connection arrives in
``config.attributes["connection"]``); developers run it with ``alembic upgrade head``, optionally
``-x url=sqlite:///path``.
"""

from __future__ import annotations

from alembic import context

from runtime.journal import schema

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


def main() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from runtime.journal.migrate import migration_engine

    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
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
