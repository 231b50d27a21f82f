"""Redaction of error text: what bide records or prints carries no credentials."""

from __future__ import annotations

import pytest

from runtime import ModelError, ToolError
from runtime.redact import clean, declare_secret, redact


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("connect to postgresql://app:pa55word@db:5432/x failed", "pa55word"),
        ("GET https://api.example/v1?api-key=abc123def&x=1: 401", "abc123def"),
        ("GET https://api.example/v1?token=tok_9f8e7d: 401", "tok_9f8e7d"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "eyJhbGciOiJIUzI1NiJ9"),
        ('{"x-api-key": "k-123456789"}', "k-123456789"),
        ("key sk-ant-api03-abcdefghijklmnop rejected", "abcdefghijklmnop"),
    ],
)
def test_credentials_in_text_are_redacted(text: str, leaked: str) -> None:
    out = redact(text)
    assert leaked not in out and "***" in out


def test_a_declared_secret_is_redacted_wherever_it_appears() -> None:
    declare_secret("hunter2-declared-value")
    assert redact("the provider said: hunter2-declared-value is invalid") == (
        "the provider said: *** is invalid"
    )


def test_ordinary_text_is_left_alone() -> None:
    text = "charge of 500 to ann failed: card declined (token expired at the bank)"
    assert redact(text) == text
    assert redact("postgresql://bide@localhost/db") == "postgresql://bide@localhost/db"


def test_every_bide_error_message_is_redacted_and_storable() -> None:
    declare_secret("sk-very-secret-000000")
    error = ModelError("HTTP 401: sk-very-secret-000000 at https://u:pw123456@h/x")
    assert str(error) == "HTTP 401: *** at https://***@h/x"
    assert str(ToolError("bytes \udcff")) == "bytes \\udcff"
    assert len(clean("x" * 20_000)) < 10_100
