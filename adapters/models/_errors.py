"""Provider failures as ``ModelError``: which are worth retrying, and how long to wait first.

Shared by the provider adapters; it imports no SDK. The table of what is retryable is in
``adapters/models/__init__.py``.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

from runtime.errors import ModelError
from runtime.tools import safe_repr

__all__ = [
    "RETRYABLE_ERROR_TYPES",
    "error_detail",
    "error_from_status",
    "retry_after_seconds",
]

RETRYABLE_STATUS = frozenset({408, 425, 429})
"""4xx statuses that mean "not now" rather than "not this request"; every 5xx is retryable too."""

RETRYABLE_ERROR_TYPES = frozenset(
    {
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "server_error",
        "service_unavailable",
        "timeout_error",
    }
)
"""Error ``type`` / ``code`` values that a 200 stream may carry and that are transient."""

_DETAIL_LIMIT = 300


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``; else None.

    ``Retry-After`` may be delta-seconds (``"7"``; fractions are accepted) or an HTTP-date, which
    is read against ``now`` (epoch seconds; the wall clock by default) and never gives less than 0.
    The millisecond header, which OpenAI and Anthropic send, is more precise and wins when valid.
    """
    if not headers:
        return None
    millis = _non_negative_number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT; a zone-less one is read as such
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _non_negative_number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number


def error_detail(body: object, fallback: str) -> str:
    """The provider's own words for an error, bounded and printable, for a ``ModelError``."""
    message: Any = None
    if isinstance(body, Mapping):
        message = body.get("message")
        inner = body.get("error")
        if message is None and isinstance(inner, Mapping):
            message = inner.get("message")
        elif message is None and isinstance(inner, str):
            message = inner
    elif isinstance(body, str) and body.strip():
        message = body.strip()
    if not isinstance(message, str) or not message:
        message = fallback
    return _bounded(message)


def _bounded(text: str) -> str:
    if len(text) <= _DETAIL_LIMIT and text.isprintable():
        return text
    return safe_repr(text, _DETAIL_LIMIT)


def error_from_status(
    provider: str, status: int, headers: Mapping[str, str] | None, detail: str
) -> ModelError:
    """A ``ModelError`` for an HTTP error status, retryable for 408/425/429 and 5xx.

    A server that says ``x-should-retry: true`` or ``false`` (OpenAI and Anthropic do) is obeyed
    over the status code: it knows whether the same request can succeed later.
    """
    retryable = status in RETRYABLE_STATUS or status >= 500
    verdict = (headers or {}).get("x-should-retry")
    if verdict == "true":
        retryable = True
    elif verdict == "false":
        retryable = False
    return ModelError(
        f"{provider} answered HTTP {status}: {detail}",
        retryable=retryable,
        retry_after=retry_after_seconds(headers) if retryable else None,
        status_code=status,
    )
