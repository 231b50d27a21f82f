"""How bide is built: layers, each importing only its own and the layers below.

From the bottom up:

1. **base**: the error tree, redaction, the terminal's helpers, the record type, crash points.
2. **values**: what a run is made of and speaks (messages, tools, models, results, approvals,
   owners and leases), and the logging and tracing every layer above may use.
3. **store**: ``runtime.store``: the ``Store`` protocol and its rules written once (``decide``,
   the store front, the lease rule), then the SQLite, PostgreSQL and memory stores.
4. **fold**: a run's records folded into its state (history, ``RunState``, why it stopped).
5. **handle**: ``runtime.journal``: the ``Journal`` people hold, its lease holding and the
   operator's verbs (resolve, approve, answer, cancel).
6. **views**: a run told to people (timelines, summaries, lists).
7. **drive**: an agent driving a run (the loop, its calls, turns, handles, reconcilers).
8. **worker**: the process that claims runs and drives them.
9. **surfaces**: the CLI, the console, the package's public face, test helpers, the demo.

A module imports modules of its own layer or below, never above, and no import circle exists,
counting imports made only for type checking or inside a function. The adapters (``adapters``:
MCP, model providers) sit above the core and use only its public modules (``PUBLIC_MODULES``),
and of each only the names in its ``__all__``. ``tests/test_layers.py`` holds the code to this.
"""

from __future__ import annotations

__all__ = ["LAYERS", "PUBLIC_MODULES"]

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "runtime.errors",
            "runtime.redact",
            "runtime.terminal",
            "runtime.records",
            "runtime.faults",
            "runtime._layers",
        ),
    ),
    (
        "values",
        (
            "runtime.messages",
            "runtime.tools",
            "runtime.model",
            "runtime.result",
            "runtime.approval",
            "runtime.functions",
            "runtime.ownership",
            "runtime.jsontext",
            "runtime.argcheck",
            "runtime.tracing",
            "runtime.logs",
            "runtime.events.types",
            "runtime.events.hub",
            "runtime.events.told",
            "runtime.driving",
            "runtime.outage",
        ),
    ),
    ("store", ("runtime.store",)),
    (
        "fold",
        (
            "runtime.history",
            "runtime.callstate",
            "runtime.state",
            "runtime.stops",
            "runtime.output",
            "runtime.limits",
            "runtime.events.live",
            "runtime.sessions",
        ),
    ),
    ("handle", ("runtime.holding", "runtime.journal")),
    (
        "views",
        (
            "runtime.telling",
            "runtime.timeline",
            "runtime.runs",
            "runtime.tree",
            "runtime.events.text",
        ),
    ),
    (
        "drive",
        (
            "runtime.retry",
            "runtime.drive",
            "runtime.turns",
            "runtime.asking",
            "runtime.handles",
            "runtime.waits",
            "runtime.findings",
            "runtime.reconcile",
            "runtime.calls",
            "runtime.answers",
            "runtime.summaries",
            "runtime.ahead",
            "runtime.bounds",
            "runtime.children",
            "runtime.events.stream",
            "runtime.loop",
            "runtime.agent",
        ),
    ),
    ("worker", ("runtime.scheduler", "runtime.worker")),
    (
        "surfaces",
        (
            "runtime.cli",
            "runtime.console",
            "runtime.testing",
            "runtime.events",
            "runtime._demo",
            "runtime.__main__",
            "runtime",
        ),
    ),
)
"""Each layer's name and the modules (or packages) in it, bottom first."""

PUBLIC_MODULES = frozenset(
    {
        "runtime",
        "runtime.agent",
        "runtime.approval",
        "runtime.children",
        "runtime.errors",
        "runtime.events",
        "runtime.functions",
        "runtime.journal",
        "runtime.jsontext",
        "runtime.logs",
        "runtime.messages",
        "runtime.model",
        "runtime.reconcile",
        "runtime.redact",
        "runtime.result",
        "runtime.retry",
        "runtime.testing",
        "runtime.tools",
        "runtime.tracing",
    }
)
"""The core's modules an adapter (or a user's integration) may import from."""
