"""What the framework adapters share: the bide context of the tool call running now (each
adapter's ``call_context()``), and the Safety a user declares per tool name."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from runtime.errors import ConfigError
from runtime.tools import Safety, ToolContext

__all__ = ["CallSlot", "safeties"]


class CallSlot:
    """Holds the bide context of the tool call one adapter is running, for its tools to read
    (their ``idempotency_key``, ``run_id``, ``call_id``)."""

    def __init__(self, name: str, *, inside: str):
        self._var: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
            name, default=None
        )
        self.inside = inside

    def current(self) -> ToolContext:
        context = self._var.get()
        if context is None:
            raise ConfigError(f"call_context() is only available inside {self.inside}")
        return context

    @contextmanager
    def holding(self, context: ToolContext | None) -> Iterator[None]:
        token = self._var.set(context)
        try:
            yield
        finally:
            self._var.reset(token)


def safeties(tools: Mapping[str, Safety] | None) -> dict[str, Safety]:
    """The Safety declared for each tool name, each checked to be a ``runtime.Safety``."""
    declared = dict(tools or {})
    for name, safety in declared.items():
        if not isinstance(safety, Safety):
            raise ConfigError(f"tool {name}: give a runtime.Safety, not {safety!r}")
    return declared
