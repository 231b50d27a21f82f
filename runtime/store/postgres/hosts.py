"""A journal URL that names several PostgreSQL servers, as libpq and ``pg_autoctl show uri``
write it (``postgresql://h1:p1,h2:p2/db?target_session_attrs=read-write``), made into the form
SQLAlchemy's asyncpg dialect reads (one ``host=h:p`` option per server), and the session
options asyncpg takes checked before any connection is tried."""

from __future__ import annotations

import re
import urllib.parse

import sqlalchemy as sa

from runtime.errors import ConfigError

__all__ = ["SESSION_ATTRS", "multi_host", "session_options"]

SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
"""What ``target_session_attrs`` may ask for (asyncpg's names; ``read-write`` reaches the
primary of a highly available cluster, whichever server that is now)."""

_HOST = re.compile(r"^[A-Za-z0-9.\-_]+(?::(\d{1,5}))?$")


def multi_host(text: str) -> str:
    """``text`` with a comma-separated list of servers moved into ``host=`` options, in their
    order; any other URL as it is. A server given without a port gets 5432."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    authority, slash, tail = rest.partition("/")
    userinfo, at, hostlist = authority.rpartition("@")
    if "," not in hostlist:
        return text
    hosts = []
    for token in hostlist.split(","):
        match = _HOST.match(token)
        if match is None:
            raise ConfigError(
                f"journal URL: server {token!r} in a multi-host URL is not host or host:port "
                "(a name or an IPv4 address; IPv6 addresses are not accepted in a list)"
            )
        port = match.group(1)
        if port is not None and not 0 < int(port) < 65536:
            raise ConfigError(f"journal URL: server {token!r}: port out of range")
        hosts.append(token if port is not None else f"{token}:5432")
    database, mark, query = tail.partition("?")
    options = urllib.parse.parse_qsl(query, keep_blank_values=True) if mark else []
    if any(name in ("host", "port") for name, _ in options):
        raise ConfigError(
            "journal URL: name the servers either in the URL (h1:p1,h2:p2) or as host= "
            "options, not both"
        )
    options = [("host", h) for h in hosts] + options
    return f"{scheme}://{userinfo}{at}{slash}{database}?{urllib.parse.urlencode(options)}"


def session_options(url: sa.URL) -> sa.URL:
    """``url`` with libpq's ``sslmode`` given to asyncpg as ``ssl`` (same values), and its
    ``target_session_attrs``, if any, checked."""
    query = dict(url.query)
    attrs = query.get("target_session_attrs")
    if attrs is not None and attrs not in SESSION_ATTRS:
        raise ConfigError(
            f"journal URL: target_session_attrs={attrs!r} is not one of {', '.join(SESSION_ATTRS)}"
        )
    if "sslmode" in query:
        if "ssl" in query:
            raise ConfigError("journal URL: give sslmode or ssl, not both")
        query["ssl"] = query.pop("sslmode")
        return url.set(query=query)
    return url
