"""The web console: runs, timelines and the operator's actions in a browser (``python -m runtime
console``). It imports the core; the core never imports it."""

from runtime.console.actions import DECISION_FORMAT
from runtime.console.app import CONTENT_SECURITY_POLICY, Console

__all__ = ["CONTENT_SECURITY_POLICY", "DECISION_FORMAT", "Console"]
