"""connect(): the targets it opens, a server in a child process, and what it lets through."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp import Client, ClientSession
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer

from adapters.mcp import Session, connect, tools
from runtime import ConfigError, ProtocolError, Safety, ToolError, ToolOutcomeUnknown
from tests.adapters.mcp.kit import stdio_params

EXAMPLE_SERVER = Path(__file__).resolve().parents[3] / "examples" / "mcp_server.py"


def echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


async def test_a_stdio_server_in_a_child_process_lists_and_answers(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    async with connect(stdio_params(env={"BIDE_TEST_RUNS": str(runs)})) as session:
        by_name = {t.spec.name: t for t in await tools(session, trust_annotations=True)}
        assert by_name["echo"].spec.safety is Safety.READ_ONLY
        assert await by_name["echo"].call({"text": "hello"}) == [{"type": "text", "text": "hello"}]
    assert runs.read_text().splitlines() == ["echo"]


async def test_a_stdio_server_dying_mid_call_is_unknown_and_the_next_call_is_refused(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    async with connect(stdio_params(env={"BIDE_TEST_RUNS": str(runs)})) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        with pytest.raises(ToolOutcomeUnknown):
            await by_name["die"].call({})
        assert session.closed
        with pytest.raises(ToolError, match="not called") as caught:
            await by_name["echo"].call({"text": "still there?"})
        assert type(caught.value) is ToolError
    assert runs.read_text().splitlines() == ["die"]


async def test_an_http_url_is_opened_as_streamable_http(http_server: str) -> None:
    async with connect(http_server) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        assert await by_name["echo"].call({"text": "over http"}) == [
            {"type": "text", "text": "over http"}
        ]


async def test_an_sdk_transport_is_a_target() -> None:
    async with connect(InMemoryTransport(echo_server())) as session:
        (echo,) = await tools(session)
        assert await echo.call({"text": "hi"}) == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize(
    "target",
    ["ftp://example.com/mcp", "not a url", 42, object()],
    ids=["ftp", "words", "number", "object"],
)
async def test_a_target_of_another_kind_is_a_config_error(target: Any) -> None:
    with pytest.raises(ConfigError):
        async with connect(target):
            pass


@pytest.mark.parametrize(
    "info", [("bide",), ("", "1"), ("bide", 1), "bide/1"], ids=["short", "empty", "int", "str"]
)
async def test_client_info_that_is_not_a_name_and_version_is_a_config_error(info: Any) -> None:
    with pytest.raises(ConfigError, match="client_info"):
        async with connect(echo_server(), client_info=info):
            pass


async def test_a_server_that_cannot_start_is_an_os_error() -> None:
    params = mcp.StdioServerParameters(command="/nonexistent/bide-test-server")
    with pytest.raises(OSError):
        async with connect(params):
            pass


async def test_a_server_that_fails_the_handshake_is_a_protocol_error() -> None:
    params = mcp.StdioServerParameters(command=sys.executable, args=["-c", "print('hello')"])
    with pytest.raises(ProtocolError, match="closed its stdout and exited with status 0"):
        async with connect(params):
            pass


async def test_a_server_that_stops_reading_then_exits_is_named_with_its_status_and_stderr() -> None:
    """Its stdin closes first, so the handshake's write fails before its stdout ends: the error
    still says that it exited, with its status and last words, not only "connection closed"."""
    script = (
        "import os, sys, time; os.close(0); time.sleep(0.5); "
        "sys.stderr.write('fatal: ORDERS_URL is not set\\n'); sys.exit(3)"
    )
    params = mcp.StdioServerParameters(command=sys.executable, args=["-c", script])
    with pytest.raises(ProtocolError, match="exited with status 3; its last stderr: fatal: ORDERS"):
        async with connect(params):
            pass


async def test_an_exception_in_the_block_comes_out_as_itself() -> None:
    # The SDK's task groups would wrap it in an ExceptionGroup.
    with pytest.raises(LookupError, match="mine"):
        async with connect(echo_server()):
            raise LookupError("mine")


async def test_cancelling_the_block_closes_the_session() -> None:
    held: list[Session] = []

    async def hold() -> None:
        async with connect(echo_server()) as session:
            held.append(session)
            await asyncio.sleep(30)

    task = asyncio.ensure_future(hold())
    while not held:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert held[0].closed


async def test_a_session_the_caller_holds_can_be_passed_to_tools() -> None:
    async with Client(echo_server(), cache=None) as client:
        (via_client,) = await tools(client)
        (via_session,) = await tools(client.session)
        assert isinstance(client.session, ClientSession)
        assert await via_client.call({"text": "a"}) == [{"type": "text", "text": "a"}]
        assert await via_session.call({"text": "b"}) == [{"type": "text", "text": "b"}]


async def test_an_mcp_client_not_entered_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not connected"):
        await tools(Client(echo_server(), cache=None))


async def test_the_documented_example_server_runs() -> None:
    params = mcp.StdioServerParameters(command=sys.executable, args=[str(EXAMPLE_SERVER)])
    async with connect(params) as session:
        names = [t.spec.name for t in await tools(session, trust_annotations=True)]
    assert names


def test_the_example_in_docs_runs_and_prints_what_it_says() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "mcp.md").read_text()
    example = docs.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", example],
        cwd=EXAMPLE_SERVER.parents[1],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[:4] == [
        "lookup_order read_only",
        "set_status idempotent",
        "refund side_effect",
        "find_refund read_only",
    ]
    assert '"status": "shipped"' in lines[4]


@pytest.mark.parametrize(
    ("pinned", "spoken"),
    [(None, "2026-07-28"), ("2026-07-28", "2026-07-28"), ("2025-11-25", "2025-11-25")],
)
async def test_a_pinned_protocol_version_skips_the_probe(pinned: str | None, spoken: str) -> None:
    server = MCPServer("pinned")

    @server.tool()
    def echo(text: str) -> str:
        return text

    async with connect(server, protocol_version=pinned) as session:
        assert session.protocol_version == spoken
        (tool,) = await tools(session)
        assert (await tool.call({"text": "hi"}))[0]["text"] == "hi"


async def test_a_stdio_server_pinned_to_the_handshake_speaks_it() -> None:
    async with connect(stdio_params(), protocol_version="2025-11-25") as session:
        assert session.protocol_version == "2025-11-25"
