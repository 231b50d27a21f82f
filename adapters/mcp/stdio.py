"""A stdio MCP server as a child process: bounded lines, strict UTF-8, its stderr made safe.

The SDK's stdio transport reads lines of any length, dies on a byte that is not UTF-8 without
closing the session, copies the server's stderr raw to the terminal, and leaves the server
running when the host is killed. This one does none of that.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import shutil
import signal
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from runtime.errors import ProtocolError
from runtime.jsontext import parse_json

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "UnreadableMessage",
    "escape_for_terminal",
    "server_name",
    "stdio_transport",
]

DEFAULT_MAX_LINE_BYTES: Final = 16 << 20
"""The longest line, in bytes, a stdio server may write before the session fails: 16 MiB.

A line is one whole JSON-RPC message; 16 MiB is sixteen times the default result limit, room
for the server's JSON escaping, while an endless line stops growing memory there.
"""

HOST_GONE_GRACE: Final = 10.0
"""Seconds a stdio server has, once its host died without stopping it, to finish and exit."""

_REAPER: Final = Path(__file__).with_name("_reaper.py")
_CHUNK: Final = 64 << 10
_EXIT_GRACE: Final = 2.0
"""Seconds a server has to exit after its stdin closes, and again after SIGTERM."""
_STDERR_LINE_CHARS: Final = 4000
"""Characters of one stderr line shown; the rest is cut, so a hostile server cannot flood."""

_TAIL_LINES = 3
_TAIL_CHARS = 300
"""The last stderr lines (each cut to this) kept for the error that says the server exited."""

# Bidi controls and other invisible characters that make text read differently from what it
# is (RLO, isolates, marks) and line separators a terminal may honour.
_INVISIBLE: Final = frozenset(
    [0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)


class UnreadableMessage(ValueError):
    """A line a server wrote that is not a JSON-RPC message, handed to the session in its place.

    ``request_id`` is the id of the request it answers, when the line is a JSON object that
    names one (as a reply would), so the session can fail that call at once."""

    def __init__(self, message: str, *, request_id: str | None) -> None:
        super().__init__(message)
        self.request_id = request_id


def server_name(params: StdioServerParameters) -> str:
    """A short name for a stdio server, from its command: ``python3 mcp_server.py``."""
    parts = [Path(params.command).name]
    if params.args:
        parts.append(Path(params.args[0]).name)
    return " ".join(part for part in parts if part) or "stdio server"


def escape_for_terminal(text: str) -> str:
    r"""``text`` with control, bidi and line-separator characters escaped (``\x1b``, ``\u202e``)."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif code in _INVISIBLE:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


@asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters,
    *,
    name: str,
    max_line_bytes: int,
    on_failure: Callable[[ProtocolError], None],
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]]:
    """Start the server and yield the session's read and write streams.

    A line over ``max_line_bytes`` (zero or less: no limit) or bytes that are not UTF-8 fail
    the session: ``on_failure`` gets a ``ProtocolError`` naming the server, then the read stream
    ends, so every pending call learns the connection is gone. The server is stopped when the
    block ends (stdin closed, then SIGTERM, then SIGKILL, each after a bounded wait), and ends
    ``HOST_GONE_GRACE`` seconds after the host process dies, however it dies.
    """
    env = get_default_environment() | (params.env or {})
    named = params.command
    if params.cwd is not None and os.sep in named:
        named = os.path.join(params.cwd, named)  # as exec would, after the chdir
    command = shutil.which(named, path=env.get("PATH"))
    if command is None:
        # The filename carries the command; the text says why (callers name the server).
        raise FileNotFoundError(errno.ENOENT, "no such executable on its PATH", params.command)
    process = await asyncio.create_subprocess_exec(
        # Through the reaper, which ends the server once the host is gone (see _reaper.py).
        *(sys.executable, "-I", "-S", str(_REAPER), str(HOST_GONE_GRACE), command),
        *params.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=params.cwd,
        start_new_session=True,  # its own process group, so the whole tree can be stopped
    )
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin and process.stdout and process.stderr
    tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
    stopping = False

    async def exited() -> None:
        # The server closed its stdout on its own (it exited): say so, with what it said last.
        if stopping:
            return
        with anyio.move_on_after(_EXIT_GRACE):
            while process.returncode is None:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await anyio.sleep(0.05)  # let its last stderr lines arrive
        status = (
            "is still running"
            if process.returncode is None
            else (f"exited with status {process.returncode}")
        )
        said = " | ".join(tail) if tail else "nothing"
        on_failure(
            ProtocolError(
                f"MCP server {name!r} closed its stdout and {status}; its last stderr: {said}"
            )
        )

    try:
        async with anyio.create_task_group() as tg:
            stdout_done = anyio.Event()
            tg.start_soon(
                _pump_stdout,
                process.stdout,
                to_session,
                name,
                max_line_bytes,
                on_failure,
                exited,
                stdout_done,
            )
            tg.start_soon(_pump_stdin, process.stdin, from_session, to_session, stdout_done)
            tg.start_soon(_pump_stderr, process.stderr, name, tail)
            try:
                yield read, write
            finally:
                stopping = True
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                tg.cancel_scope.cancel()
    finally:
        for stream in (read, write, to_session, from_session):
            stream.close()


async def _pump_stdout(
    stdout: asyncio.StreamReader,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    name: str,
    limit: int,
    on_failure: Callable[[ProtocolError], None],
    exited: Callable[[], Awaitable[None]],
    done: anyio.Event,
) -> None:
    try:
        async with to_session, contextlib.aclosing(_lines(stdout, name, limit)) as lines:
            try:
                async for line in lines:
                    message = _parse(line, name)
                    try:
                        await to_session.send(message)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return  # the session is gone
            except ProtocolError as failure:
                on_failure(failure)
                return
            await exited()
    finally:
        done.set()


async def _lines(stream: asyncio.StreamReader, name: str, limit: int) -> AsyncGenerator[bytes]:
    """The stream's newline-ended lines; a partial line at the end is dropped."""
    buffer = bytearray()
    while chunk := await stream.read(_CHUNK):
        scanned = len(buffer)
        buffer += chunk
        while (end := buffer.find(b"\n", scanned)) >= 0:
            if 0 < limit < end:
                break
            yield bytes(buffer[:end])
            del buffer[: end + 1]
            scanned = 0
        else:
            if not 0 < limit < len(buffer):
                continue
        raise ProtocolError(
            f"MCP server {name!r} wrote a line of more than {limit} bytes on stdout; "
            "the session is closed"
        )


def _parse(line: bytes, name: str) -> SessionMessage | Exception:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"MCP server {name!r} wrote bytes that are not UTF-8 on stdout "
            f"({exc.reason} at byte {exc.start} of a line); the session is closed"
        ) from exc
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as exc:
        # As the SDK does, a line that is not a message is reported to the session, not fatal;
        # unlike the SDK, with the request it answers when it names one, so that call fails
        # at once instead of at its timeout.
        return _unreadable(text, name, exc)


def _unreadable(text: str, name: str, exc: ValueError) -> UnreadableMessage:
    try:
        value = parse_json(text)
    except ValueError:
        value = None
    answered = value.get("id") if isinstance(value, dict) and "method" not in value else None
    if isinstance(answered, bool) or not isinstance(answered, int | str):
        answered = None
    what = "a JSON-RPC message" if isinstance(value, dict) else "JSON"
    shown = escape_for_terminal(text[:80]) + ("..." if len(text) > 80 else "")
    unreadable = UnreadableMessage(
        f"MCP server {name!r} wrote a line on stdout that is not {what}: {shown}",
        request_id=None if answered is None else str(answered),
    )
    unreadable.__cause__ = exc
    return unreadable


async def _pump_stdin(
    stdin: asyncio.StreamWriter,
    from_session: MemoryObjectReceiveStream[SessionMessage],
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    stdout_done: anyio.Event,
) -> None:
    try:
        async with from_session:
            async for item in from_session:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(data.encode() + b"\n")
                await stdin.drain()
    except (ConnectionError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        # The server stopped reading. If it exited, its stdout pump is about to say so (with its
        # status and last stderr): let it, then end the session's read side, within a bound, so
        # that no call waits for ever.
        with anyio.move_on_after(_EXIT_GRACE + 1):
            await stdout_done.wait()
        await to_session.aclose()


async def _pump_stderr(
    stderr: asyncio.StreamReader, name: str, tail: collections.deque[str]
) -> None:
    """Copy the server's stderr to ours, one prefixed and escaped line at a time, keeping the
    last few lines for the error that says it exited."""
    buffer = bytearray()
    cut = False
    while chunk := await stderr.read(_CHUNK):
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            if not cut:
                line = bytes(buffer[:end])
                _show(name, line)
                text = escape_for_terminal(line.decode("utf-8", "backslashreplace").strip())
                if text:
                    tail.append(text[:_TAIL_CHARS])
            cut = False
            del buffer[: end + 1]
        if len(buffer) > _STDERR_LINE_CHARS and not cut:
            _show(name, bytes(buffer), cut=True)
            cut = True
        if cut:
            buffer.clear()
    if buffer and not cut:
        _show(name, bytes(buffer))


def _show(name: str, line: bytes, *, cut: bool = False) -> None:
    text = line.decode("utf-8", "backslashreplace").removesuffix("\r")
    if len(text) > _STDERR_LINE_CHARS:
        text, cut = text[:_STDERR_LINE_CHARS], True
    shown = escape_for_terminal(text) + (" [line cut]" if cut else "")
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"[{escape_for_terminal(name)}] {shown}\n")
        sys.stderr.flush()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the server's process group; every wait bounded."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, RuntimeError):
        process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(_EXIT_GRACE):
            # Polled, not process.wait(): that also waits for the pipes, which a grandchild
            # that inherited them may hold open after the server itself has exited.
            while process.returncode is None:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        if process.returncode is not None:
            break
    # Pipes a pump stopped reading never see their end, so asyncio would not close them.
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()
