"""Fixtures for the model adapters: a scripted provider server, models pointed at it, and the
tools and messages the tests of both providers send."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.models._wire import wire_name
from adapters.models.anthropic import AnthropicModel
from adapters.models.openai import OpenAIChatModel
from runtime.messages import UserMessage
from runtime.tools import ToolSpec
from tests.adapters.models.provider_server import (
    ProviderServer,
    Reply,
    anthropic_text_stream,
    openai_text_stream,
)

ADD = ToolSpec(
    "add",
    "Add two numbers",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
READ = ToolSpec(
    "files.read",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
READ_WIRE = wire_name("files.read")
HELLO = [UserMessage("hi")]


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    s = ProviderServer()
    await s.start()
    try:
        yield s
    finally:
        await s.aclose()


class Models:
    """Builds models aimed at the test server, and closes them all when the test ends."""

    def __init__(self, server: ProviderServer):
        self.server = server
        self._open: list[OpenAIChatModel | AnthropicModel] = []

    def openai(self, **options: Any) -> OpenAIChatModel:
        options.setdefault("api_key", "sk-test")
        options.setdefault("base_url", f"{self.server.url}/v1")
        model = OpenAIChatModel("test-model", **options)
        self._open.append(model)
        return model

    def anthropic(self, **options: Any) -> AnthropicModel:
        options.setdefault("api_key", "sk-ant-test")
        options.setdefault("base_url", self.server.url)
        model = AnthropicModel("claude-test", **options)
        self._open.append(model)
        return model

    async def aclose(self) -> None:
        for model in self._open:
            await model.aclose()


@pytest.fixture
async def models(server: ProviderServer) -> AsyncIterator[Models]:
    built = Models(server)
    try:
        yield built
    finally:
        await built.aclose()


@dataclass(frozen=True)
class Dialect:
    """One provider, as the tests that hold for every provider see it."""

    name: str
    make: Callable[..., OpenAIChatModel | AnthropicModel]
    text_reply: Callable[[], Reply]
    path: str


@pytest.fixture(params=["openai", "anthropic"])
def dialect(request: pytest.FixtureRequest, models: Models) -> Dialect:
    if request.param == "openai":
        return Dialect("openai", models.openai, openai_text_stream, "/v1/chat/completions")
    return Dialect("anthropic", models.anthropic, anthropic_text_stream, "/v1/messages")
