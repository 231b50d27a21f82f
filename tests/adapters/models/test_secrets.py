"""Secrets never reach the journal: a provider that echoes its key, a base URL with credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import Agent, Journal, ModelError, RetryPolicy, RunStatus
from runtime.errors import ConfigError
from runtime.timeline import render, timeline
from tests.adapters.models.conftest import HELLO, Dialect, Models
from tests.adapters.models.provider_server import JSONReply, ProviderServer

KEY = "sk-live-0123456789abcdefXYZ"


async def test_api_key_comes_from_the_named_environment_variable(
    server: ProviderServer, dialect: Dialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIDE_TEST_API_KEY", "sk-from-env")
    server.script(dialect.text_reply())
    await dialect.make(api_key=None, api_key_env="BIDE_TEST_API_KEY").complete(None, HELLO, [])
    assert server.received[0].headers["authorization"] == "Bearer sk-from-env"


def test_missing_api_key_is_a_config_error_naming_the_variable(
    dialect: Dialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BIDE_TEST_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="BIDE_TEST_API_KEY"):
        dialect.make(api_key=None, api_key_env="BIDE_TEST_API_KEY")


async def test_a_key_echoed_in_a_401_body_is_not_journaled_shown_or_raised(
    server: ProviderServer, dialect: Dialect, db_path: Path
) -> None:
    body = {"type": "error", "error": {"type": "auth", "message": f"Incorrect API key: {KEY}"}}
    server.script(JSONReply(body, status=401))
    model = dialect.make(api_key=KEY)
    async with Journal(db_path) as journal:
        result = await Agent(model=model).run("r", "hello", journal=journal)
        assert result.status is RunStatus.FAILED
        assert result.error is not None and "Incorrect API key: ***" in result.error
        shown = "\n".join(render(timeline(await journal.require("r"))))
    assert KEY not in shown and "***" in shown
    for file in db_path.parent.glob("bide.db*"):
        assert KEY.encode() not in file.read_bytes(), file.name


async def test_credentials_in_the_base_url_are_not_journaled(
    server: ProviderServer, models: Models, db_path: Path
) -> None:
    # A port nobody listens on.
    model = models.openai(base_url="http://bob:hunter2hunter2@127.0.0.1:1/v1?api-key=s3cr3tvalue")
    model_error = None
    async with Journal(db_path) as journal:
        try:
            once = RetryPolicy(max_attempts=1)
            await Agent(model=model, model_retry=once).run("r", "hello", journal=journal)
        except ModelError as exc:  # a retryable connection error leaves the run resumable
            model_error = str(exc)
        state = await journal.require("r")
        shown = "\n".join(render(timeline(state)))
    assert model_error is not None and "http://***@127.0.0.1:1/v1?api-key=***" in model_error
    for text in (model_error, shown):
        assert "hunter2hunter2" not in text and "s3cr3tvalue" not in text
    for file in db_path.parent.glob("bide.db*"):
        data = file.read_bytes()
        assert b"hunter2hunter2" not in data and b"s3cr3tvalue" not in data
