"""Retry-After parsing and the retryable/not-retryable split of HTTP statuses."""

from __future__ import annotations

import email.utils

import pytest

from adapters.models._errors import error_detail, error_from_status, retry_after_seconds

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": " 2.5 "}, 2.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": email.utils.formatdate(NOW + 90, usegmt=True)}, 90.0),
        ({"retry-after": email.utils.formatdate(NOW - 90, usegmt=True)}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "nonsense", "retry-after": "9"}, 9.0),
    ],
)
def test_retry_after_reads_delta_seconds_http_dates_and_milliseconds(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after_seconds(headers, now=NOW) == seconds


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (404, False),
        (408, True),
        (409, False),
        (425, True),
        (429, True),
        (500, True),
        (529, True),
    ],
)
def test_statuses_are_retryable_when_a_later_identical_request_can_succeed(
    status: int, retryable: bool
) -> None:
    error = error_from_status("p", status, {"retry-after": "4"}, "detail")
    assert (error.retryable, error.status_code) == (retryable, status)
    assert error.retry_after == (4.0 if retryable else None)


def test_error_detail_prefers_the_providers_message_and_bounds_it() -> None:
    assert error_detail({"error": {"message": "bad key"}}, "fallback") == "bad key"
    assert error_detail({"message": "top level"}, "fallback") == "top level"
    assert error_detail("<html>oops</html>", "fallback") == "<html>oops</html>"
    assert error_detail(None, "fallback") == "fallback"
    long = error_detail({"message": "x" * 1000 + "\x1b[31m"}, "fallback")
    assert len(long) < 400
    assert "\x1b" not in long
