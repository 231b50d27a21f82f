"""The public surface: every name in __all__ exists, and every public name is in __all__."""

from __future__ import annotations

import types

import pytest

import runtime


@pytest.mark.parametrize("module", [runtime])
def test_all_is_sorted_and_exact(module: types.ModuleType) -> None:
    names = module.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(module, name), name
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public <= set(names), public - set(names)
