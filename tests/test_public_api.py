"""The public surface: each package's ``__all__`` is exact, adapters build on public names of the
core only, and no SDK type crosses the MCP adapter's surface except as an input it accepts."""

from __future__ import annotations

import ast
import importlib
import inspect
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import mcp_types
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.auth import TokenStorage
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

import adapters.mcp
import adapters.models
import adapters.openai_agents
import adapters.pydantic_ai
import runtime
import runtime.console

ROOT = Path(__file__).resolve().parents[1]


PACKAGES = [
    runtime,
    runtime.console,
    adapters.mcp,
    adapters.models,
    adapters.openai_agents,
    adapters.pydantic_ai,
]


def linter_order(name: str) -> tuple[bool, bool, str]:
    """How the linter (ruff RUF022) sorts ``__all__``: constants, classes, then the rest."""
    return (not name.isupper(), not name[:1].isupper(), name)


@pytest.mark.parametrize("module", PACKAGES, ids=lambda m: m.__name__)
def test_all_is_sorted_and_exact(module: types.ModuleType) -> None:
    names = module.__all__
    assert names == sorted(names, key=linter_order)
    for name in names:
        assert hasattr(module, name), name
        assert not isinstance(getattr(module, name), types.ModuleType), name
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public <= set(names), public - set(names)


def _core_names_used_by_adapters() -> Iterator[tuple[str, str, str]]:
    """(file, module, name) for each name an adapter takes from ``runtime``."""
    for path in sorted((ROOT / "adapters").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "runtime":
                assert node.module is not None
                for alias in node.names:
                    yield where, node.module, alias.name
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "runtime"
            ):
                yield where, "runtime", node.attr


def test_adapters_use_only_public_documented_names_of_the_core() -> None:
    used = list(_core_names_used_by_adapters())
    assert len({module for _, module, _ in used}) > 3  # the walk found the imports
    for where, module_name, name in used:
        module = importlib.import_module(module_name)
        assert name in getattr(module, "__all__", ()), f"{where}: {module_name}.{name}"
        value = getattr(module, name)
        if inspect.isfunction(value) or inspect.isclass(
            value
        ):  # an alias has no __doc__ of its own
            assert inspect.getdoc(value), f"{module_name}.{name} has no docstring"


SDK_MODULES = ("mcp.", "mcp_types")

SDK_INPUTS: frozenset[object] = frozenset(
    {StdioServerParameters, Server, MCPServer, ClientSession, Client, TokenStorage}
)
"""SDK objects a caller builds with the SDK and hands to bide (``connect``'s targets, a session
for ``tools``): accepted at the boundary, never returned or kept on a bide object."""


def _named(annotation: object) -> Iterator[object]:
    """``annotation`` and every type it names: arms of a union, an alias's origin and arguments."""
    yield annotation
    origin = typing.get_origin(annotation)
    if origin is not None:
        yield from _named(origin)
    for argument in typing.get_args(annotation):
        yield from _named(argument)


def _is_sdk(value: object) -> bool:
    return inspect.isclass(value) and value.__module__.startswith(SDK_MODULES)


Found = dict[str, set[type]]


def _sdk_on_surface(module: types.ModuleType) -> tuple[Found, Found]:
    """The SDK classes each exported name shows, by where: (as an input, anywhere else)."""
    inputs: Found = {}
    other: Found = {}

    def note(where: str, annotation: object, *, as_input: bool) -> None:
        for named in _named(annotation):
            if _is_sdk(named):
                assert isinstance(named, type)
                (inputs if as_input else other).setdefault(where, set()).add(named)

    def signature(where: str, function: object) -> None:
        for parameter, annotation in typing.get_type_hints(function).items():
            note(f"{where}({parameter})", annotation, as_input=parameter != "return")

    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            note(name, value, as_input=False)
            for attribute, annotation in typing.get_type_hints(value).items():
                if not attribute.startswith("_"):
                    note(f"{name}.{attribute}", annotation, as_input=False)
            for member_name, member in vars(value).items():
                if member_name.startswith("_") and member_name != "__init__":
                    continue
                if isinstance(member, property) and member.fget is not None:
                    returns = typing.get_type_hints(member.fget).get("return")
                    note(f"{name}.{member_name}", returns, as_input=False)
                elif inspect.isfunction(member):
                    signature(f"{name}.{member_name}", member)
        elif inspect.isfunction(value):
            signature(name, inspect.unwrap(value))
        else:  # a constant, or an alias naming the types a parameter accepts
            note(name, value, as_input=True)
    return inputs, other


def test_no_sdk_type_crosses_the_mcp_surface_but_the_inputs_it_accepts() -> None:
    inputs, other = _sdk_on_surface(adapters.mcp)
    assert other == {}
    # The walk sees through Target and into the signatures: these name what a caller built.
    assert set(inputs) == {
        "Target",
        "connect(target)",
        "tools(session)",
        "client_credentials(storage)",
    }
    assert set().union(*inputs.values()) <= SDK_INPUTS


def test_the_sdk_check_sees_through_aliases_signatures_and_attributes() -> None:
    """The check can fail: an SDK type in a union alias, a return type or an attribute shows."""
    leaky = types.ModuleType("leaky")

    class Holder:
        tool: mcp_types.Tool

        @property
        def listed(self) -> list[mcp_types.Tool]:
            return []

    def listing() -> dict[str, mcp_types.Tool]:
        return {}

    leaky.__dict__.update(
        __all__=["Alias", "Holder", "listing"],
        Alias=str | mcp_types.Tool,
        Holder=Holder,
        listing=listing,
    )
    inputs, other = _sdk_on_surface(leaky)
    assert inputs == {"Alias": {mcp_types.Tool}}
    assert other == {
        "Holder.tool": {mcp_types.Tool},
        "Holder.listed": {mcp_types.Tool},
        "listing(return)": {mcp_types.Tool},
    }
