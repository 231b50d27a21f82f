"""What a journal URL names: a PostgreSQL database, or a SQLite file (by URL or by plain path).
Read without SQLAlchemy unless a SQLite URL must be parsed. ``runtime.store`` picks the store
for a URL."""

from __future__ import annotations

import os

from runtime.errors import ConfigError

__all__ = ["is_postgres_url", "sqlite_path"]


def is_postgres_url(url: str | os.PathLike[str]) -> bool:
    """Whether ``url`` names a PostgreSQL journal (``postgresql://`` or ``postgresql+asyncpg://``)."""
    text = os.fspath(url)
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    return scheme.partition("+")[0] in ("postgresql", "postgres")


def sqlite_path(url: str | os.PathLike[str]) -> str:
    """The file behind a journal URL: ``sqlite+aiosqlite:///path``, ``sqlite:///path`` or a path.

    A plain path is a file name, every character of it (``%41`` and ``?`` included): every
    connection bide makes opens the file by name, never through a URI.
    """
    text = os.fspath(url)
    if "://" not in text:
        path = text
    else:
        import sqlalchemy as sa

        try:
            parsed = sa.engine.make_url(text)
        except sa.exc.ArgumentError as exc:
            raise ConfigError(f"invalid journal URL {text!r}: {exc}") from exc
        if parsed.get_backend_name() != "sqlite":
            raise ConfigError(
                f"journal URL {parsed.render_as_string()!r}: not a SQLite journal "
                "(sqlite+aiosqlite:///path/to/bide.db, or a plain file path)"
            )
        path = parsed.database or ""
    if path in ("", ":memory:") or path.startswith("file::memory:"):
        raise ConfigError(
            "a journal needs a file (its writer and readers share it): give a path, not :memory:"
        )
    return os.path.abspath(path)
