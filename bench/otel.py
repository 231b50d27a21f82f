"""B1 through the agent with tracing off and on: no tracer provider, then the OpenTelemetry SDK
with a batch processor and an exporter that drops every span, interleaved in one process.

Run: python bench/otel.py [--calls N] [--repeats R] [--stores memory,sqlite] (needs the SDK:
pip install 'bide[otel]').
On ``MemoryStore`` (no disk: the loop's own CPU, where tracing's cost shows) and on SQLite at
FULL (what a user feels). Per call: one model turn (a chat span) and one tool call (an
execute_tool span). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench.agent import TimedModel, b1_script, make_echo
from bench.anchors import header, measure, spread
from runtime import Agent, Journal, Safety, tracing
from runtime.testing import MemoryStore, ScriptedModel


class Drop(SpanExporter):
    """Takes every span and does nothing with it: the SDK's own cost, without an export."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def one_run(journal: Callable[[], Journal], calls: int, safety: Safety) -> float:
    """Microseconds per call of one run, the time inside the scripted model left out."""
    model = TimedModel(ScriptedModel(b1_script(calls)))
    agent = Agent(model=model, tools=[make_echo(safety)], max_turns=calls + 1)
    async with journal() as j:
        t = time.perf_counter()
        result = await agent.run(f"b1-{time.monotonic_ns()}", "go", journal=j)
        elapsed = time.perf_counter() - t
    assert result.status.value == "completed", result
    return (elapsed - model.seconds) / calls * 1e6


def bare_span_us(provider: TracerProvider, n: int = 2000) -> float:
    """Microseconds of one span of this provider with no attribute: the anchor of the SDK's cost,
    measured in the same run (a call through the agent opens two spans with attributes)."""
    tracer = provider.get_tracer("bench")
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            with tracer.start_as_current_span("anchor"):
                pass
        batches.append((time.perf_counter() - t) / n * 1e6)
    return median(batches)


async def main(calls: int, repeats: int, only: set[str]) -> None:
    print(header(measure()), flush=True)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    modes = {"off": tracing.configure, "sdk": lambda: tracing.configure(tracer_provider=provider)}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "b1.db")
        async with Journal(path):
            pass  # migrate once, outside the timing
        stores: dict[str, Callable[[], Journal]] = {
            "memory": lambda: Journal(store=MemoryStore(check=False)),
            "sqlite": lambda: Journal(path),
        }
        for store, journal in stores.items():
            if store not in only:
                continue
            for safety in (Safety.READ_ONLY, Safety.SIDE_EFFECT):
                got: dict[str, list[float]] = {mode: [] for mode in modes}
                for rep in range(repeats):
                    order = list(modes) if rep % 2 == 0 else list(reversed(modes))
                    for mode in order:
                        modes[mode]()
                        got[mode].append(await one_run(journal, calls, safety))
                tracing.configure()
                anchor = bare_span_us(provider)
                off, sdk = median(got["off"]), median(got["sdk"])
                print(
                    f"B1-otel {store} {safety.value}: no provider {spread(got['off'])} us/call, "
                    f"SDK + dropping exporter {spread(got['sdk'])} us/call: "
                    f"+{sdk - off:.0f} us/call (x{sdk / off:.2f}), = {(sdk - off) / anchor:.1f} "
                    f"bare SDK spans of {anchor:.1f} us measured right after",
                    flush=True,
                )
    provider.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stores", default="memory,sqlite", help="comma-separated")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.repeats, set(args.stores.split(","))))
