"""A TCP proxy in front of the test server that can break a connection at a chosen message.

Real sockets and a real server: the proxy only forwards bytes, and on cue drops the client's
connection, before or after passing on the client's simple-protocol query that starts with a
given word (asyncpg sends BEGIN and COMMIT that way), or refuses new connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class Cue:
    word: bytes
    """The query's first word, as the client sends it (``b"COMMIT"``, ``b"BEGIN"``)."""
    forward: bool
    """Pass the query on to the server before dropping the client (COMMIT: the server commits
    and the client never hears of it)."""
    fired: asyncio.Event = field(default_factory=asyncio.Event)


class Proxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 5432):
        self.target = (host, port)
        self.cue: Cue | None = None
        self.refusing = False
        self.sends = 0
        """How many times a client sent (one round trip each: a client waits for the answer)."""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._server.wait_closed()

    def url(self, database_url: str) -> str:
        """``database_url`` pointed at this proxy instead of the server."""
        host = f"{self.target[0]}:{self.target[1]}"
        assert host in database_url, database_url
        return database_url.replace(host, f"127.0.0.1:{self.port}")

    def tell_clients(self, message: bytes) -> None:
        """Send ``message`` to every client as if the server had, between its answers."""
        for writer in self._clients:
            writer.write(message)

    def arm(self, word: bytes, *, forward: bool) -> Cue:
        self.cue = Cue(word, forward)
        return self.cue

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._clients.add(writer)
        down = asyncio.create_task(self._pump(up_reader, writer))
        try:
            while chunk := await reader.read(65536):
                self.sends += 1
                cue = self.cue
                at = -1 if cue is None else _query_at(chunk, cue.word)
                if cue is None or at < 0:
                    up_writer.write(chunk)
                    await up_writer.drain()
                    continue
                self.cue = None
                up_writer.write(chunk if cue.forward else chunk[:at])
                await up_writer.drain()
                writer.transport.abort()  # the client's connection breaks here
                cue.fired.set()
                if cue.forward:
                    await asyncio.sleep(0.5)  # the server reads the query, and acts on it
                break
        finally:
            down.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await down
            up_writer.transport.abort()
            writer.transport.abort()
            self._tasks.discard(task)
            self._clients.discard(writer)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.transport.abort()  # the server hung up: so does the proxy, to the client


def _query_at(chunk: bytes, word: bytes) -> int:
    """Where in ``chunk`` a simple Query message (``Q``, length, text) starting with ``word``
    begins, or -1."""
    at = chunk.find(b"Q")
    while at >= 0:
        if chunk[at + 5 : at + 5 + len(word)] == word:
            return at
        at = chunk.find(b"Q", at + 1)
    return -1
