"""``Agent[OutputT]``: mypy infers a run's output type from ``output_type`` (a strict check of a
small program that uses the API, and of one that misuses it)."""

from __future__ import annotations

import textwrap

import pytest
from mypy import api

from tests.conftest import ROOT

PROGRAM = """
from typing import assert_type

import pydantic

from runtime import Agent, Journal, RunResult
from runtime.testing import ScriptedModel


class Invoice(pydantic.BaseModel):
    cents: int


async def main(journal: Journal) -> None:
    typed = Agent(model=ScriptedModel([]), output_type=Invoice)
    assert_type(typed, Agent[Invoice])
    result = await typed.run("r", "x", journal=journal)
    assert_type(result, RunResult[Invoice])
    assert_type(result.output, Invoice | None)
    assert_type((await typed.resume("r", journal=journal)).output, Invoice | None)
    plain = Agent(model=ScriptedModel([]))
    assert_type((await plain.run("p", "x", journal=journal)).output, str | None)
    number = Agent(model=ScriptedModel([]), output_type=int)
    assert_type(number, Agent[int])
    either = Agent[Invoice | int](model=ScriptedModel([]), output_type=Invoice | int)
    assert_type((await either.run("e", "x", journal=journal)).output, Invoice | int | None)
"""

MISUSE = """
import pydantic

from runtime import Agent, Journal
from runtime.testing import ScriptedModel


class Invoice(pydantic.BaseModel):
    cents: int


async def main(journal: Journal) -> None:
    result = await Agent(model=ScriptedModel([]), output_type=Invoice).run(
        "r", "x", journal=journal
    )
    assert result.output is not None
    text: str = result.output.cents
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One strict mypy run over both programs (a run takes seconds)."""
    where = tmp_path_factory.mktemp("typing")
    (where / "program.py").write_text(textwrap.dedent(PROGRAM))
    (where / "misuse.py").write_text(textwrap.dedent(MISUSE))
    out, err, _ = api.run(
        [
            "--strict",
            "--no-incremental",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(where / "program.py"),
            str(where / "misuse.py"),
        ]
    )
    return out + err


def test_the_output_type_flows_to_the_result(report: str) -> None:
    assert "program.py" not in report, report


def test_a_misuse_of_the_typed_output_is_caught(report: str) -> None:
    errors = [line for line in report.splitlines() if "misuse.py" in line]
    assert len(errors) == 1, report
    assert (
        'Incompatible types in assignment (expression has type "int", variable has type '
        in (errors[0])
    )
