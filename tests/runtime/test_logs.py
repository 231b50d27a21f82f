"""The library logs through the standard ``logging`` module and never configures anything."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from runtime import logs
from tests.conftest import ROOT, run_child

# A run of the README's kind of agent: one read, one side effect, an answer.
AGENT = """
import asyncio, logging, os, sys, tempfile
import structlog
from runtime import Agent, Journal, Safety, ToolContext, tool
from runtime.testing import ScriptedModel

@tool(safety=Safety.READ_ONLY)
async def balance(customer: str) -> int:
    return 1200

@tool
async def charge(customer: str, cents: int, context: ToolContext) -> dict:
    return {"charged": cents, "secret": "RESULT-VALUE"}

model = ScriptedModel([
    {"tool_calls": [{"id": "c1", "name": "balance", "arguments": {"customer": "ARG-VALUE"}}]},
    {"tool_calls": [{"id": "c2", "name": "charge", "arguments": {"customer": "ann", "cents": 5}}]},
    {"text": "done"},
])

async def main():
    path = os.path.join(tempfile.mkdtemp(), "bide.db")
    async with Journal(path) as journal:
        await Agent(model=model, tools=[balance, charge]).run("r1", "go", journal=journal)
"""


def test_an_application_that_configures_no_logging_hears_nothing_and_structlog_stays_unset() -> (
    None
):
    done = run_child(
        AGENT + "asyncio.run(main())\nprint(structlog.is_configured())\n",
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("False\n", "")


def test_logging_basic_config_at_info_hears_the_events_without_arguments_or_results() -> None:
    done = run_child(
        AGENT + "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(name)s "
        "%(levelname)s %(message)s')\nasyncio.run(main())\n",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    started = (
        "runtime.calls INFO tool_started call_id='c2' tool='charge' safety='side_effect' "
        "run_id='r1'"
    )
    assert started in lines, lines
    assert any(line.startswith("runtime.agent INFO drive_finished ") for line in lines)
    assert "ARG-VALUE" not in done.stdout and "RESULT-VALUE" not in done.stdout
    assert "DEBUG" not in done.stdout


def test_debug_level_adds_the_tool_results_with_their_arguments() -> None:
    done = run_child(
        AGENT + "logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format='%(name)s "
        "%(levelname)s %(message)s')\nasyncio.run(main())\n",
    )
    assert done.returncode == 0, done.stderr
    results = [line for line in done.stdout.splitlines() if " tool_result " in line]
    assert len(results) == 2 and all(r.startswith("runtime.calls DEBUG") for r in results)
    assert "ARG-VALUE" in results[0] and "RESULT-VALUE" in results[1]


def test_structlog_processor_formatter_gets_the_event_fields_whole() -> None:
    setup = (
        "handler = logging.StreamHandler(sys.stdout)\n"
        "handler.setFormatter(structlog.stdlib.ProcessorFormatter(processors=["
        "structlog.stdlib.ProcessorFormatter.remove_processors_meta, "
        "structlog.processors.JSONRenderer()]))\n"
        "logging.getLogger('runtime').addHandler(handler)\n"
        "logging.getLogger('runtime').setLevel(logging.INFO)\n"
    )
    done = run_child(AGENT + setup + "asyncio.run(main())\n")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    started = [e for e in events if e["event"] == "tool_started"]
    assert started[1] == {
        "event": "tool_started",
        "call_id": "c2",
        "tool": "charge",
        "safety": "side_effect",
        "run_id": "r1",
    }


def test_every_module_gets_its_logger_from_runtime_logs_and_none_configures_structlog() -> None:
    offenders = []
    for package in ("runtime", "adapters"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for needle in ("structlog.get_logger", "structlog.configure", "structlog.wrap_logger"):
                if needle in text:
                    offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []


def test_a_disabled_level_builds_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """An info or debug event at a level the application does not hear runs no processor."""
    processed: list[str] = []

    def spy(_logger: Any, _name: str, event: Any) -> Any:
        processed.append(event["event"])
        return event

    monkeypatch.setattr(logs, "_PROCESSORS", [spy, *logs._PROCESSORS])
    log = logs.get_logger("runtime.test_quiet")
    stdlib = logging.getLogger("runtime.test_quiet")
    monkeypatch.setattr(stdlib, "level", logging.WARNING)
    log.debug("quiet_debug")
    log.info("quiet_info")
    assert processed == []
    log.warning("heard_warning")
    monkeypatch.setattr(stdlib, "level", logging.DEBUG)  # heard at once, as structlog would
    log.debug("heard_debug")
    log.info("heard_info")
    assert processed == ["heard_warning", "heard_debug", "heard_info"]
