"""The client the MCP conformance suite drives: bide's ``adapters.mcp`` used as a host would.

Contract of @modelcontextprotocol/conformance (client mode): the harness starts a scenario
server, runs ``python -m tests.conformance.bide_client <url>`` with MCP_CONFORMANCE_SCENARIO
(and, for some, MCP_CONFORMANCE_CONTEXT, JSON), then judges what reached the server. Exit 0 on
success. Everything MCP goes through ``connect``, ``tools`` and ``Tool.call``; an auth scenario
passes the SDK's OAuth provider to ``connect(url, auth=...)`` (``tests.conformance.oauth``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

from adapters.mcp import ElicitationAnswer, ElicitationRequest, connect, tools
from runtime import ToolContext
from runtime.tools import Safety

SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")


def log(*parts: object) -> None:
    print("[bide-client]", *parts, file=sys.stderr, flush=True)


def context_json() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


def call_context(name: str, n: int) -> ToolContext:
    return ToolContext(
        run_id="conformance", call_id=f"c{n}", tool_name=name, safety=Safety.SIDE_EFFECT
    )


async def accept(request: ElicitationRequest) -> ElicitationAnswer:
    """Accepts without content: bide fills in the form's defaults (SEP-1034)."""
    log("elicitation:", request.mode, repr(request.message), "tool:", request.tool_name)
    return ElicitationAnswer.accept()


async def confirm(request: ElicitationRequest) -> ElicitationAnswer:
    log("elicitation (confirm):", repr(request.message), "tool:", request.tool_name)
    return ElicitationAnswer.accept({"confirmed": True})


async def options(url: str) -> dict[str, Any]:
    if SCENARIO.startswith("auth/"):
        from tests.conformance.oauth import auth_for

        return {"auth": await auth_for(url, SCENARIO, context_json())}
    return {}


async def call_each(
    url: str,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    elicitation: Any = None,
    tolerate: bool = False,
) -> None:
    """Connect, list, and call each of ``calls`` (``None``: every listed tool with no
    arguments; a name the server does not list is skipped: bide calls only listed tools)."""
    extra = await options(url)
    async with connect(url, elicitation=elicitation, connect_timeout=60, **extra) as session:
        log("connected: protocol", session.protocol_version, "server", session.server_info)
        listed = {t.spec.name: t for t in await tools(session, call_timeout=60)}
        log("tools:", sorted(listed))
        todo = [(name, {}) for name in listed] if calls is None else calls
        for n, (name, arguments) in enumerate(todo, 1):
            if name not in listed:
                log(f"{name!r} is not listed: skipped")
                continue
            try:
                value = await listed[name].call(arguments, call_context(name, n))
                log(f"{name} ->", json.dumps(value)[:300])
            except Exception as exc:
                if not tolerate:
                    raise
                log(f"{name} raised {type(exc).__name__}: {exc}")


def stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    stub = {"string": "x", "integer": 0, "number": 0, "boolean": False}
    properties = schema.get("properties") or {}
    return {
        key: stub.get((properties.get(key) or {}).get("type"), "x")
        for key in schema.get("required", [])
    }


async def run(url: str) -> None:
    s = SCENARIO
    if s in ("initialize", "json-schema-ref-no-deref"):
        await call_each(url, [])
    elif s == "tools_call":
        await call_each(url, [("add_numbers", {"a": 5, "b": 3})])
    elif s == "http-standard-headers":
        await call_each(url)
    elif s == "request-metadata":
        await call_each(url, [("add_numbers", {"a": 5, "b": 3})], elicitation=accept)
    elif s == "elicitation-sep1034-client-defaults":
        await call_each(url, [("test_client_elicitation_defaults", {})], elicitation=accept)
    elif s == "sse-retry":
        await call_each(url, [("test_reconnection", {})])
    elif s == "sep-2322-client-request-state":
        names = ["test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state"]
        await call_each(
            url, [(n, {}) for n in [*names, "test_mrtr_no_result_type"]], elicitation=confirm
        )
    elif s == "json-schema-2020-12-preservation":
        async with connect(url, connect_timeout=60) as session:
            listed = {t.spec.name: t for t in await tools(session, call_timeout=60)}
            focal = listed["json_schema_2020_12_tool"].spec.input_schema
            await listed["json_schema_echo"].call({"schema": focal}, call_context("echo", 1))
    elif s == "http-invalid-tool-headers":
        async with connect(url, connect_timeout=60) as session:
            for n, tool in enumerate(await tools(session, call_timeout=60), 1):
                try:
                    await tool.call(
                        stub_arguments(dict(tool.spec.input_schema)),
                        call_context(tool.spec.name, n),
                    )
                except Exception as exc:
                    log(f"{tool.spec.name} raised {type(exc).__name__}: {exc}")
    elif s == "http-custom-headers":
        calls = [(c["name"], c.get("arguments") or {}) for c in context_json().get("toolCalls", [])]
        await call_each(url, calls, tolerate=True)
    elif s.startswith("auth/"):
        async with connect(url, connect_timeout=60, **await options(url)) as session:
            listed = await tools(session, call_timeout=60)
            if listed:
                tool = listed[0]
                try:
                    await tool.call({}, call_context(tool.spec.name, 1))
                except Exception as exc:
                    log(f"{tool.spec.name} raised {type(exc).__name__}: {exc}")
    else:
        raise SystemExit(f"bide client: no handler for scenario {s!r}")


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: bide_client.py <server-url>  (MCP_CONFORMANCE_SCENARIO set)")
    url = sys.argv[-1]
    log("scenario", SCENARIO, "url", url)
    try:
        asyncio.run(run(url))
    except SystemExit:
        raise
    except BaseException as exc:
        log("FAILED:", type(exc).__name__, exc)
        traceback.print_exc(file=sys.stderr)
        raise SystemExit(1) from None
    log("done")


if __name__ == "__main__":
    main()
