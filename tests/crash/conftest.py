"""The crash suite's harness fixture and its report at the end of the session (the long sets are
marked ``slow``: ``tests/conftest.py`` runs them only with ``-m slow``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.crash import report
from tests.crash.harness import Harness


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


@pytest.fixture(scope="session", autouse=True)
def crash_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Write the report once every crash test has run (printed again by the summary below)."""
    yield
    text = report.render()
    if not text:
        return
    paths = [tmp_path_factory.getbasetemp() / "crash-report.md"]
    if os.environ.get("BIDE_CRASH_REPORT"):
        paths.append(Path(os.environ["BIDE_CRASH_REPORT"]))
    for path in paths:
        path.write_text(text + "\n")
    report.WRITTEN.extend(str(p) for p in paths)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    text = report.render()
    if not text:
        return
    terminalreporter.write_sep("=", "crash suite")
    for line in text.splitlines():
        terminalreporter.write_line(line)
    for path in report.WRITTEN:
        terminalreporter.write_line(f"(written to {path})")
