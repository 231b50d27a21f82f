"""How each run status looks: one entry per status word, and one fallback for words not known."""

from __future__ import annotations

from runtime.console.html import Html

__all__ = ["STATUSES", "badge"]

STATUSES: dict[str, str] = {
    "running": "a live process drives it now",
    "submitted": "started durably, not driven yet: a worker or resume drives it",
    "orphaned": "not ended and no live process drives it (it crashed, or a drive stopped short "
    "of an end): resume it, or let a worker",
    "waiting": "waits for an approval, an answer, its timer or a signal",
    "halted": "a side effect's outcome is unknown: resolve it, then resume",
    "completed": "ended with an answer",
    "failed": "ended with an error",
    "cancelled": "cancelled: no new turn or call starts",
    "unreadable": "one of its records cannot be read: the row names it",
}
"""Every status ``RunState.status()`` gives, with the tooltip a badge carries. A new status word
is one more entry here."""


def badge(status: str) -> Html:
    """A status as a coloured word; an unknown word is shown as it is, in a neutral badge."""
    known = status in STATUSES
    css = f"status status-{status}" if known else "status status-other"
    title = STATUSES.get(status, "a status this console does not know yet")
    return Html("<span class='{css}' title='{title}'>{status}</span>").format(
        css=css, title=title, status=status
    )
