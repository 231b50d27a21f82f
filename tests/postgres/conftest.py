"""``-m slow`` selects the long PostgreSQL runs (300 runs on three workers); otherwise they skip."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="a long PostgreSQL run: run it with `-m slow tests/postgres`")
    for item in items:
        if "slow" in item.keywords and "tests/postgres/" in item.nodeid:
            item.add_marker(skip)
