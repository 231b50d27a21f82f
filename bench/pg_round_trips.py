"""Round trips per append on PostgreSQL, counted on the wire: the journal is opened through a
TCP proxy that counts what the client sends, one message batch per round trip (the client waits
for each answer before it sends again). Beside it, the client's CPU time per append (the proxy
runs in another process, so it is not counted), which a loaded machine disturbs far less than
wall time.

Run: python bench/pg_round_trips.py [--server postgresql://...] [--calls N]. It makes a database
of its own on that server (dropped at the end). It imports ``runtime`` from the environment it
runs in (not from beside this file), so the same script counts any checkout's writer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import time
from typing import Any

import asyncpg
import sqlalchemy as sa

from runtime.store.postgres import PostgresStore

PAYLOAD = {"value": "x" * 180}


class Counter:
    """Forwards bytes both ways; counts the client's sends."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.sends = 0
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        down = asyncio.create_task(_pump(up_reader, writer))
        self._tasks.add(down)
        try:
            while chunk := await reader.read(1 << 20):
                self.sends += 1
                up_writer.write(chunk)
                await up_writer.drain()
        finally:
            up_writer.close()
            down.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await down


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(1 << 20):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


def serve(target: tuple[str, int], ports: multiprocessing.SimpleQueue[int], sends: Any) -> None:
    """The proxy, in a process of its own: its port goes to ``ports``, its count to ``sends``."""

    async def main() -> None:
        counter = Counter(target)
        server = await asyncio.start_server(counter.accept, "127.0.0.1", 0)
        ports.put(server.sockets[0].getsockname()[1])
        while True:
            await asyncio.sleep(0.005)
            sends.value = counter.sends

    asyncio.run(main())


async def count(url: sa.URL, calls: int) -> None:
    ports: multiprocessing.SimpleQueue[int] = multiprocessing.SimpleQueue()
    sends = multiprocessing.Value("q", 0)
    target = (url.host or "127.0.0.1", url.port or 5432)
    proxy = multiprocessing.Process(target=serve, args=(target, ports, sends), daemon=True)
    proxy.start()
    try:
        proxied = url.set(host="127.0.0.1", port=ports.get()).render_as_string(False)
        async with await PostgresStore.open(proxied) as store:
            for side_effect in (False, True):
                run = f"rt-{side_effect}"
                await store.create_run(run)
                # Once first: statements are prepared on first use (a round trip of their own).
                await store.append(run, "warm", "result", PAYLOAD)
                await asyncio.sleep(0.05)
                before, cpu = sends.value, time.process_time()
                for i in range(calls):
                    if side_effect:
                        await store.append(run, f"attempt/{i}/1", "attempt", {"call_id": str(i)})
                    await store.append(run, f"result/{i}/1", "result", PAYLOAD)
                cpu = time.process_time() - cpu
                await asyncio.sleep(0.05)
                appends = calls * (2 if side_effect else 1)
                name = "SIDE_EFFECT" if side_effect else "READ_ONLY"
                print(
                    f"{name}: {(sends.value - before) / appends:.2f} round trips and "
                    f"{cpu / appends * 1e6:.0f} us of client CPU per append ({calls} calls), "
                    f"load average {os.getloadavg()[0]:.2f}"
                )
    finally:
        proxy.terminate()
        proxy.join()


async def main(server: str, calls: int) -> None:
    name = f"bide_rt_{os.getpid()}"
    admin = await asyncpg.connect(server)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        await count(sa.engine.make_url(server).set(database=name), calls)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.server, args.calls))
