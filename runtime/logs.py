"""The library's loggers: structlog events carried by the standard ``logging`` module.

bide never configures logging. Its events go to ``logging.getLogger(name)`` as structlog event
dicts, and nothing is printed unless the application configures logging (a ``NullHandler`` on
the package loggers keeps Python's last-resort handler quiet). structlog's ProcessorFormatter
renders them with their fields; any other formatter prints ``event key=value ...``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import structlog

from runtime.tracing import add_trace_ids

__all__ = ["get_logger"]

_quiet: set[str] = set()
_quiet_lock = threading.Lock()


class _Event(dict[str, Any]):
    """An event dict as a ``LogRecord`` message: ProcessorFormatter copies it, and a plain
    formatter prints it as one line instead of a dict's repr."""

    def __str__(self) -> str:
        fields = " ".join(f"{k}={v!r}" for k, v in self.items() if k != "event")
        return f"{self.get('event')} {fields}".rstrip()


def _to_record(
    logger: Any, method_name: str, event_dict: structlog.typing.EventDict
) -> tuple[tuple[_Event], dict[str, dict[str, Any]]]:
    # What ProcessorFormatter.wrap_for_formatter does, with a message that prints well alone.
    return (_Event(event_dict),), {"extra": {"_logger": logger, "_name": method_name}}


class _Logger(structlog.stdlib.BoundLogger):
    """A stdlib BoundLogger whose disabled levels return before structlog builds an event, by
    the test ``filter_by_level`` makes (so a level set on a logger is heard at once), where
    ``filter_by_level`` comes after a context copy and ends in a raised ``DropEvent``. A drive
    logs a handful of info events that an application at WARNING never hears."""

    def _hears(self, level: int) -> bool:
        logger = self._logger
        return not logger.disabled and level >= logger.getEffectiveLevel()

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._hears(logging.DEBUG):
            return self._proxy_to_logger("debug", event, *args, **kw)
        return None

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._hears(logging.INFO):
            return self._proxy_to_logger("info", event, *args, **kw)
        return None


_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,  # first: a disabled level costs no further processor
    structlog.contextvars.merge_contextvars,
    add_trace_ids,  # trace_id and span_id of the active span, when there is one
    _to_record,
]


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """The logger for module ``name`` (pass ``__name__``), without touching structlog's global
    configuration: its events go to ``logging.getLogger(name)``, with the ``run_id`` and any
    other fields bound in ``structlog.contextvars`` merged in."""
    top = name.partition(".")[0]
    with _quiet_lock:
        if top not in _quiet:
            logging.getLogger(top).addHandler(logging.NullHandler())
            _quiet.add(top)
    return _Logger(logging.getLogger(name), _PROCESSORS, context={})
