"""Logging for the CLI: a stdlib handler on stderr for bide's loggers, console lines on a terminal
and JSON lines otherwise (structlog's ProcessorFormatter renders them).

The runtime's events (``turn_recorded``, ``tool_started`` ...) are the progress lines. Each known
event gets a short sentence: on the console it replaces the event name; in JSON it is added as
``message`` beside the event's fields, so both read well.
"""

from __future__ import annotations

import logging
import string
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager, suppress
from typing import Any, TextIO

import structlog

from runtime.terminal import printable

__all__ = ["LOGGERS", "RESOLVED", "configured", "formatter"]

LOGGERS = ("runtime", "adapters")
"""The package loggers the CLI prints: every module logger of bide is below one of them."""

# What each event says; fields named here are consumed on the console (they are in the sentence).
SENTENCES: dict[str, str] = {
    "run_started": "run {run_id} started ({agent})",
    "run_resumed": "resumed: {turns} turns and {records} records already in the journal",
    "turn_recorded": "turn {n}: {what}",
    "tool_started": "{tool} started [{safety}] call {call_id}",
    "tool_finished": "{tool} finished: {outcome} call {call_id}",
    "tool_halted": "{tool} HALTED call {call_id}: {cause}",
    "tool_retry": "call {call_id} retries (attempt {attempt} failed), in {delay_s}s",
    "model_retry": "the model failed (attempt {attempt}), retrying in {delay_s}s: {error}",
    "model_failed": "the model failed: {error}",
    "late_result_after_resolution": "call {call_id} returned after it was resolved",
    "drive_finished": "{status}: {turns} turn(s) in all, {executed} tool run(s) now, {ms} ms",
    "drive_stopped": "stopped: {error}",
    "run_waiting": "{tool} call {call_id} waits for {kind}",
    "approval_decided": "the gate on call {call_id} is {outcome}",
    "decision_recorded": "{approver}'s decision on call {call_id} recorded: {decision}, "
    "{counted}; the gate: {outcome}",
    "waiting_for": "waiting for {what}",
    "run_halted": "halted on {call_id} {tool}: find out whether it acted, then {next}",
    "run_failed": "failed: {error}",
    "run_cancelled": "cancelled",
    "call_resolved": "call {call_id} resolved: {outcome}",
    "run_cancel_requested": "cancel requested",
    "run_submitted": "submitted: a worker drives it",
    "worker_started": "worker {worker} started ({concurrency} at a time)",
    "worker_claimed": "claimed {run_id}",
    "worker_finished": "{run_id}: {status} in {ms} ms",
    "worker_yielded": "{run_id}: left for another worker (stopping)",
    "worker_skipped_run": "{run_id} is left alone: {error}",
    "worker_drive_failed": "{run_id}: the journal failed under the drive: {error}",
    "worker_lease_lost": "{run_id}: its lease ended: {error}",
    "agent_overridden": "run {run_id} was started by agent {started_by}; resuming it with agent "
    "{agent} (--agent)",
    "worker_idle": "nothing to drive for {seconds} s: exiting",
    "worker_stopped": "worker {worker} stopped ({claimed} run(s) claimed)",
    "lease_taken_over": "took the run over from {gone}, which is gone",
    "lease_lost": "this drive's lease was taken over: {error}",
    "reconcile_tried": "call {call_id}: {said}",
    "call_reconciled": "call {call_id} settled by reconciler {reconciler}: it said {said}",
    "worker_reconciled": "{run_id} call {call_id}: {said}",
}


# A resolution's outcome as the operator typed it (`resolve --succeeded`), not as it is stored.
RESOLVED = {"value": "succeeded", "error": "failed", "not_executed": "not executed"}

# Fields a sentence is made from without naming them: the console drops them with the rest.
_FOLDED: dict[str, tuple[str, ...]] = {"decision_recorded": ("approve", "counts", "reason", "new")}


def _sentence(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
    name = event.get("event")
    template = SENTENCES.get(str(name))
    if template is None:
        return event
    fields = dict(event)
    if name == "turn_recorded":
        calls = event.get("tool_calls", 0)
        fields.setdefault("what", "final answer" if not calls else f"{calls} tool call(s)")
    elif name == "decision_recorded":
        # The person's own decision; `outcome` is the gate's, which other decisions may make.
        if "decision" not in event:
            fields["decision"] = "approve" if event.get("approve") else "deny"
        reason = event.get("reason")
        fields["counted"] = (
            "counted"
            if event.get("counts")
            else f"not counted ({reason})"
            if reason
            else "not counted"
        )
    elif name == "call_resolved":
        fields["outcome"] = RESOLVED.get(str(event.get("outcome")), event.get("outcome"))
    with suppress(KeyError, ValueError, IndexError):  # a field missing: keep the bare event
        event["message"] = template.format_map(fields)
    return event


def _console_event(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> Any:
    message = event.pop("message", None)
    if message is not None:
        template = SENTENCES[str(event["event"])]
        # The console serves one operator watching one run: the sentence says it all, except
        # a write that lost to another driver (won=False), which is worth seeing.
        folded = _FOLDED.get(str(event["event"]), ())
        for field in ("tool_calls", "run_id", *folded, *_fields(template)):
            event.pop(field, None)
        if event.get("won") is True:
            del event["won"]
        event["event"] = message
    # Tool names, call ids and errors come from the model and tools: never raw to a terminal.
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = printable(value)
    return event


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


@contextmanager
def configured(*, level: int, fmt: str, stream: TextIO | None = None) -> Iterator[None]:
    """Print bide's log events on ``stream`` (default stderr) for one CLI invocation, then put
    the ``runtime`` and ``adapters`` loggers back as they were.

    ``fmt`` is ``console``, ``json`` or ``auto`` (console when ``stream`` is a terminal). Only
    bide's own loggers get the handler: other libraries' records are theirs to configure.
    """
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(fmt, tty=stream.isatty()))
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, was_level, was_propagating in saved:
            logger.removeHandler(handler)
            logger.setLevel(was_level)
            logger.propagate = was_propagating
        with suppress(Exception):  # a closed or broken stream: nothing left to say on it
            handler.flush()


def formatter(fmt: str, *, tty: bool) -> logging.Formatter:
    """The stdlib formatter the CLI renders with: console lines, or JSON lines."""
    console = fmt == "console" or (fmt == "auto" and tty)
    shared: list[Any] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.add_log_level,
        _sentence,
    ]
    renderer: list[Any]
    if console:
        renderer = [
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
            _console_event,
            structlog.dev.ConsoleRenderer(colors=tty, pad_event_to=0, pad_level=False),
        ]
    else:
        renderer = [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ]
    # Records from plain stdlib loggers under runtime/adapters get the same treatment.
    foreign: list[Any] = [structlog.contextvars.merge_contextvars]
    return structlog.stdlib.ProcessorFormatter(
        processors=[*shared, *renderer], foreign_pre_chain=foreign
    )
