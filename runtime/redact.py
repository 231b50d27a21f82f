"""Secrets out of recorded text: credentials in URLs, key-like query parameters, bearer tokens,
and the values the host declared secret (a model adapter declares its API key).

Every error text bide records or shows passes through ``clean``: it is redacted, made valid
Unicode, and bounded, so that what reaches the journal, ``show`` and stderr can be shared.
"""

from __future__ import annotations

import re
import threading

__all__ = ["REDACTED", "clean", "declare_secret", "redact"]

REDACTED = "***"

MESSAGE_LIMIT = 10_000
"""Characters of an error message that are kept (the rest is cut, and the cut is said)."""

_MIN_SECRET = 6
"""Shorter declared values are not redacted by value: they would blank ordinary words."""

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@]*:[^/\s@]*@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:api[-_]?key|apikey|key|[\w\-]*token|auth|[\w\-]*secret|"
    r"[\w\-]*password|[\w\-]*passwd|pwd|sig|signature|x-api-key|code)=)[^&#\s\"']+"
)
"""A URL parameter that carries a secret: by name, and any whose name ends in password,
secret or token (libpq's ``sslpassword``, an OAuth ``refresh_token``)."""
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_HEADER = re.compile(
    r"(?i)\b((?:x-)?api[-_]?key|authorization|x-goog-api-key)([\"']?\s*[:=]\s*[\"']?)"
    r"[^\s\"',;]+"
)
_KNOWN_PREFIXES = re.compile(r"\b(sk-(?:ant-)?[A-Za-z0-9_\-]{12,}|gh[pousr]_[A-Za-z0-9]{20,})")

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def declare_secret(value: str | None) -> None:
    """Have ``value`` redacted wherever bide records or prints text, for the process's life."""
    global _secrets
    if not isinstance(value, str) or len(value) < _MIN_SECRET:
        return
    with _lock:
        _secrets = _secrets | {value}


def redact(text: str) -> str:
    """``text`` with credentials and declared secrets replaced by ``***``."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", text)
    text = _QUERY_SECRET.sub(rf"\1{REDACTED}", text)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    text = _HEADER.sub(rf"\1\2{REDACTED}", text)
    return _KNOWN_PREFIXES.sub(REDACTED, text)


def clean(text: object, *, limit: int = MESSAGE_LIMIT) -> str:
    """An error message fit to record: redacted, valid Unicode, at most ``limit`` characters."""
    out = redact(text if isinstance(text, str) else str(text))
    if not out.isascii():
        # A lone surrogate (from undecodable bytes) cannot be stored as UTF-8: show it escaped.
        out = out.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(out) > limit:
        out = f"{out[:limit]}... ({len(out) - limit} more characters)"
    return out
