"""Fixtures for the model adapters: a scripted provider server, and models pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from provider_server import ProviderServer

from adapters.models.openai import OpenAIChatModel


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
        self._open: list[OpenAIChatModel] = []

    def openai(self, **options: Any) -> OpenAIChatModel:
        options.setdefault("api_key", "sk-test")
        options.setdefault("base_url", f"{self.server.url}/v1")
        model = OpenAIChatModel("test-model", **options)
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
