"""A stdio server as a child process: what bad bytes, endless lines, stderr and a killed host do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import mcp
import pytest
from mcp.shared.message import SessionMessage

from adapters.mcp import DEFAULT_MAX_LINE_BYTES, connect, tools
from adapters.mcp.stdio import escape_for_terminal, stdio_transport
from runtime import ProtocolError, ToolContext, ToolError, ToolOutcomeUnknown
from tests.adapters.mcp.kit import STDIO_SERVER, hostile_params

ROOT = Path(__file__).resolve().parents[3]


def side_effect(call_id: str = "call-1") -> ToolContext:
    return ToolContext(run_id="run-1", call_id=call_id, tool_name="garble")


async def test_bytes_that_are_not_utf8_at_startup_fail_connect_naming_the_server() -> None:
    params = hostile_params(env={"BIDE_TEST_GARBLE_AT_START": "1"})
    with anyio.fail_after(20):
        with pytest.raises(ProtocolError, match=r"'garbler'.*not UTF-8") as caught:
            async with connect(params, name="garbler"):
                pass
    assert "session is closed" in str(caught.value)


async def test_bytes_that_are_not_utf8_mid_call_close_the_session_and_fail_calls_at_once(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    with anyio.fail_after(20):
        async with connect(hostile_params(env={"BIDE_TEST_RUNS": str(runs)})) as session:
            by_name = {t.spec.name: t for t in await tools(session, call_timeout=None)}
            # The pending side effect may have run: an unknown outcome, without waiting.
            with pytest.raises(ToolOutcomeUnknown, match="not UTF-8"):
                await by_name["garble"].call({}, side_effect())
            assert session.closed
            with pytest.raises(ToolError, match=r"not called.*not UTF-8") as later:
                await by_name["echo"].call({"text": "still there?"})
            assert type(later.value) is ToolError
            with pytest.raises(ProtocolError, match="not UTF-8"):
                await tools(session)
    assert runs.read_text().splitlines() == ["garble"]


async def test_an_endless_line_on_stdout_fails_the_session_at_the_line_limit() -> None:
    with anyio.fail_after(30):
        async with connect(hostile_params(), max_line_bytes=1 << 20) as session:
            by_name = {t.spec.name: t for t in await tools(session, call_timeout=None)}
            with pytest.raises(ToolOutcomeUnknown):
                await by_name["flood"].call({}, side_effect())
            assert session.closed
            with pytest.raises(ToolError, match="more than 1048576 bytes"):
                await by_name["echo"].call({"text": "hi"})


async def test_lines_under_the_limit_are_read() -> None:
    text = "y" * 2000  # the answer line holds it twice, as text and as structured content
    async with connect(hostile_params(), max_line_bytes=6000) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        assert await by_name["echo"].call({"text": text}) == [{"type": "text", "text": text}]
        assert not session.closed


def test_the_default_line_limit_is_sixteen_mebibytes() -> None:
    assert DEFAULT_MAX_LINE_BYTES == 16 << 20


async def test_a_servers_stderr_is_prefixed_with_its_name_and_escaped(
    capfd: pytest.CaptureFixture[str],
) -> None:
    hostile = "\x1b[2Jwiped \u202eevil\u2066 bell\x07"
    async with connect(hostile_params(), name="noisy") as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        await by_name["shout"].call({"text": hostile})
        with anyio.fail_after(10):
            while "[noisy]" not in (seen := capfd.readouterr().err):
                await anyio.sleep(0.05)
    assert "[noisy] \\x1b[2Jwiped \\u202eevil\\u2066 bell\\x07" in seen
    assert "\x1b" not in seen and "\u202e" not in seen and "\x07" not in seen


def test_escape_for_terminal_escapes_controls_and_bidi_and_keeps_other_text() -> None:
    assert escape_for_terminal("tab\there\r\n") == "tab\\x09here\\x0d\\x0a"
    assert escape_for_terminal("\u202a\u202b\u202c\u202d\u202e") == (
        "\\u202a\\u202b\\u202c\\u202d\\u202e"
    )
    assert escape_for_terminal("\u2066\u2067\u2068\u2069\u200e\u200f\u061c") == (
        "\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c"
    )
    assert escape_for_terminal("\x85\x9b") == "\\x85\\x9b"
    assert escape_for_terminal("héllo wörld 名前") == "héllo wörld 名前"


HOST = """
import asyncio, sys
import adapters.mcp.stdio
from tests.adapters.mcp.kit import STDIO_SERVER, hostile_params
from adapters.mcp import connect, tools

adapters.mcp.stdio.HOST_GONE_GRACE = float(sys.argv[2])  # the test waits it out: keep it short

async def main():
    async with connect(hostile_params(env={"BIDE_TEST_RUNS": sys.argv[1]})) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        await by_name["nap"].call({"seconds": 120})

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended; only its parent's reaping is left


@pytest.mark.skipif(sys.platform == "win32", reason="the SDK's stdio transport runs there")
def test_a_host_ended_by_sigterm_takes_its_stdio_servers_with_it(tmp_path: Path) -> None:
    """The server naps, deaf to its stdin closing; it is ended within the grace after its host
    (one second here, not the shipped ten: the reaper is the same)."""
    runs, grace = tmp_path / "runs", 1.0
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(runs), str(grace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 30
        while not (runs.exists() and runs.read_text().startswith("nap ")):
            assert host.poll() is None, "the host exited early"
            assert time.monotonic() < deadline, "the server never started its nap"
            time.sleep(0.05)
        server_pid = int(runs.read_text().split()[1])
        assert _alive(server_pid)
        host.send_signal(signal.SIGTERM)
        assert host.wait(timeout=10) == -signal.SIGTERM
        deadline = time.monotonic() + grace + 15
        while _alive(server_pid):
            assert time.monotonic() < deadline, "the stdio server outlived its host"
            time.sleep(0.05)
    finally:
        host.kill()
        host.wait()
        if runs.exists() and runs.read_text().startswith("nap "):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(runs.read_text().split()[1]), signal.SIGKILL)


async def test_a_relative_command_is_found_from_the_servers_cwd(tmp_path: Path) -> None:
    server = tmp_path / "server.sh"
    server.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STDIO_SERVER}"\n')
    server.chmod(0o755)
    params = mcp.StdioServerParameters(command="./server.sh", cwd=str(tmp_path))
    async with connect(params) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        assert await by_name["echo"].call({"text": "hi"}) == [{"type": "text", "text": "hi"}]


async def test_a_command_that_is_not_there_is_an_os_error_naming_it() -> None:
    params = mcp.StdioServerParameters(command="no-such-bide-server")
    with pytest.raises(FileNotFoundError, match="no-such-bide-server"):
        async with connect(params):
            pass


async def test_a_write_that_fails_because_the_server_is_exiting_waits_for_its_exit_status(
    tmp_path: Path,
) -> None:
    """The server closes its stdin and stdout, then exits a moment later: a message written
    meanwhile fails (nobody reads), and the session is told why the server went (its status and
    last stderr) before its read side ends, not only that the connection closed."""
    ready = tmp_path / "closed"
    script = (
        "import os, sys, time; os.close(0); os.close(1); "
        f"open({str(ready)!r}, 'w').close(); time.sleep(0.5); "
        "sys.stderr.write('fatal: ORDERS_URL is not set\\n'); sys.exit(3)"
    )
    params = mcp.StdioServerParameters(command=sys.executable, args=["-c", script])
    failures: list[ProtocolError] = []
    message = mcp.types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
    async with stdio_transport(
        params, name="orders", max_line_bytes=DEFAULT_MAX_LINE_BYTES, on_failure=failures.append
    ) as (read, write):
        with anyio.fail_after(10):
            while not ready.exists():
                await anyio.sleep(0.01)
        await write.send(SessionMessage(message))  # the pipe has no reader: this write fails
        with anyio.fail_after(10):
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                while True:
                    await read.receive()
            # The read side ended: by then the server's exit must have been reported.
            assert [str(f) for f in failures] == [
                "MCP server 'orders' closed its stdout and exited with status 3; its last "
                "stderr: fatal: ORDERS_URL is not set"
            ]
