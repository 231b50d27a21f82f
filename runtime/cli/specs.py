"""Agent specs: from ``module:attr`` or ``path/to/agent.toml`` to an open Agent, closed again
after the drive.

``open_agent`` is the one place a spec is understood, so that another kind of spec (a file path,
say) is one more branch here and nowhere else.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from runtime.errors import BideError, ConfigError

if TYPE_CHECKING:  # the agent's machinery is imported by the commands that drive one
    from runtime.agent import Agent

__all__ = ["is_agent_file", "journaled_spec", "open_agent"]

_FORMS = (
    "an Agent, a function (sync or async) returning one, or an async context manager "
    "(or a function returning one) yielding one"
)


@asynccontextmanager
async def open_agent(spec: str) -> AsyncIterator[Agent[Any]]:
    """Import ``spec`` (``module:attr``) and yield the Agent it names, for the length of a drive.

    A spec ending in ``.toml`` is an agent file (``adapters.agentfile``): its model, tools and
    MCP servers are built, and the servers stay connected for the drive.

    The attribute may be an Agent; a function, sync or async, returning one; or an async context
    manager, or a function returning one, yielding one (for agents whose tools hold connections,
    such as MCP servers): it is entered before the drive and exited after it. Anything that
    cannot be imported or gives no Agent is a ``ConfigError`` naming the spec.
    """
    if is_agent_file(spec):
        # An agent file brings providers and MCP servers: adapters, imported only when named.
        from adapters.agentfile import open_agent_file

        async with open_agent_file(spec) as agent:
            yield agent
        return
    target = _import(spec)
    async with AsyncExitStack() as stack:
        yield await _agent_from(spec, target, stack)


def is_agent_file(spec: str) -> bool:
    """Whether ``spec`` names an agent file (``path/to/agent.toml``) rather than module:attr."""
    return spec.endswith(".toml")


def journaled_spec(spec: str) -> str:
    """The spec as the run journals it: an agent file by its absolute path, so that a resume
    from another directory finds the same file."""
    return os.path.abspath(spec) if is_agent_file(spec) else spec


def _import(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"agent spec {spec!r} is not module:attr (for example myagents.support:agent)"
        )
    _current_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigError(
                f"agent spec {spec!r}: no module named {exc.name!r} (is it importable from "
                f"{os.getcwd()}?)"
            ) from exc
        raise ConfigError(f"agent spec {spec!r}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"agent spec {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(
                f"agent spec {spec!r}: {module_name} has no attribute {attr!r}"
            ) from None
    return value


def _current_directory_importable() -> None:
    # `python -m` puts the current directory first on sys.path; the `bide` script does not.
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


async def _agent_from(spec: str, target: Any, stack: AsyncExitStack) -> Agent[Any]:
    from runtime.agent import Agent

    value = target
    try:
        if not isinstance(value, Agent) and not _is_async_cm(value) and callable(value):
            value = value()
            if inspect.isawaitable(value):
                value = await value
        if _is_async_cm(value):
            value = await stack.enter_async_context(value)
    except BideError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"agent spec {spec!r}: building the agent failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(value, Agent):
        raise ConfigError(
            f"agent spec {spec!r} gave {type(value).__name__}, not an Agent; it must name {_FORMS}"
        )
    return value


def _is_async_cm(value: Any) -> bool:
    return hasattr(value, "__aenter__") and hasattr(value, "__aexit__")
