"""The nemesis suite's report at the end of the session (its long set is marked ``slow``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.nemesis import report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    text = report.render()
    if text:
        terminalreporter.write_sep("=", "nemesis suite")
        for line in text.splitlines():
            terminalreporter.write_line(line)
