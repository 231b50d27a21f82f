"""The dependency rule of ``runtime/_layers.py``, held to the code: each module imports only
modules of its own layer or the layers below, no import circle exists (imports made only for
type checking, or inside a function, count too), and the adapters use the core's public names.
"""

from __future__ import annotations

import ast
import importlib
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime._layers import LAYERS, PUBLIC_MODULES

ROOT = Path(__file__).resolve().parents[1]


def modules(package: str) -> dict[str, Path]:
    """Every module of a package by dotted name."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


CORE = modules("runtime")
ADAPTERS = modules("adapters")


def imported(name: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """Each import in a module, wherever it is (module level, ``TYPE_CHECKING``, a function):
    the module it names, the names it takes from it, and its line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module or ""
            if node.level:
                module = ".".join([*base, *([module] if module else [])])
            yield module, [alias.name for alias in node.names], node.lineno


def targets(module: str, names: list[str], known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` an import reaches: the one it names, and those it takes as names
    (``from runtime import records``)."""
    out = {module} if module in known else set()
    out.update(f"{module}.{n}" for n in names if f"{module}.{n}" in known)
    return out


def graph(known: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        reached: set[str] = set()
        for module, names, _ in imported(name, path):
            reached |= targets(module, names, known)
        reached.discard(name)
        edges[name] = reached
    return edges


def layer_of(module: str) -> int:
    """The index of the module's layer in ``LAYERS``."""
    for i, (_, members) in enumerate(LAYERS):
        for member in members:
            # The package itself is a layer of its own; its modules are each placed by name.
            if module == member or (member != "runtime" and module.startswith(member + ".")):
                return i
    raise AssertionError(f"{module} is in no layer of LAYERS: add it to one")


def test_every_core_module_has_a_layer() -> None:
    for module in CORE:
        layer_of(module)


def test_each_module_imports_only_its_layer_and_the_layers_below() -> None:
    upward = []
    for name, path in CORE.items():
        mine = layer_of(name)
        for module, names, line in imported(name, path):
            for target in targets(module, names, CORE):
                if target == "runtime" and name != "runtime":
                    # ``from runtime import records``: the submodule is the dependency.
                    continue
                if layer_of(target) > mine:
                    upward.append(
                        f"{path.relative_to(ROOT)}:{line}: {name} ({LAYERS[mine][0]}) "
                        f"imports {target} ({LAYERS[layer_of(target)][0]})"
                    )
    assert not upward, "\n".join(upward)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    edges = graph({**CORE, **ADAPTERS})
    # A package's __init__ re-exporting its modules is not a circle with them: drop the edges
    # from a module to the packages that contain it.
    for name in edges:
        edges[name] = {t for t in edges[name] if not name.startswith(t + ".")}
    assert circles(edges) == []


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_adapters_use_only_the_cores_public_names(name: str) -> None:
    """An adapter imports from the core only the modules ``PUBLIC_MODULES`` lists, and
    from each only names in its ``__all__``."""
    wrong = []
    for module, names, line in imported(name, ADAPTERS[name]):
        if module != "runtime" and not module.startswith("runtime."):
            continue
        if module not in PUBLIC_MODULES:
            wrong.append(f"line {line}: {module} is not a public module of the core")
            continue
        exported = set(getattr(importlib.import_module(module), "__all__", ()))
        hidden = [n for n in names if n not in exported and f"{module}.{n}" not in CORE]
        if hidden:
            wrong.append(f"line {line}: {module} does not export {hidden}")
    assert not wrong, "\n".join(wrong)
