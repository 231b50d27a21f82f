"""Elicitation in both protocol eras, tool-list changes, and what the client says it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import mcp.types as types
import pytest
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

import runtime
from adapters.mcp import (
    MAX_INPUT_ROUNDS,
    ElicitationAnswer,
    ElicitationRequest,
    connect,
    decline_elicitation,
    tools,
)
from runtime import ToolContext, ToolOutcomeUnknown
from tests.adapters.mcp.kit import Scripted, handshake_era

ERAS: dict[str, tuple[Callable[[MCPServer], Any], str]] = {
    "handshake": (handshake_era, "2025-11-25"),
    "2026": (lambda server: server, "2026-07-28"),
}


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


def greeter() -> MCPServer:
    """A server whose tool asks the host for a name: standalone elicitation/create in the
    handshake era, an input request inside the call's answer from 2026-07-28 (SEP-2322)."""
    server = MCPServer("greeter")

    @server.tool()
    def greet(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
        if isinstance(who, AcceptedElicitation):
            return f"hi {who.data.name}"
        return f"no name ({who.action})"

    @server.tool()
    def can_elicit(ctx: Context) -> str:
        capabilities = ctx.client_capabilities
        return "yes" if capabilities and capabilities.elicitation else "no"

    @server.tool()
    async def change(ctx: Context) -> str:
        if ctx.protocol_version == "2026-07-28":
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return "changed"

    return server


def text_of(value: Any) -> str:
    ((block,),) = [value]
    assert block["type"] == "text"
    return str(block["text"])


async def call(session: Any, name: str, ctx: ToolContext | None = None) -> str:
    by_name = {t.spec.name: t for t in await tools(session)}
    return text_of(await by_name[name].call({}, ctx))


async def test_handshake_era_elicitation_reaches_the_resolver() -> None:
    asked: list[ElicitationRequest] = []

    async def resolver(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer.accept({"name": "Ada"})

    async with connect(handshake_era(greeter()), elicitation=resolver) as session:
        assert session.protocol_version == "2025-11-25"
        assert await call(session, "greet") == "hi Ada"
    (request,) = asked
    assert (request.message, request.mode) == ("Your name?", "form")
    assert request.requested_schema is not None
    assert request.requested_schema["properties"]["name"]["type"] == "string"
    # The request came on the connection, not within the call.
    assert (request.tool_name, request.call) == (None, None)


async def test_2026_input_requests_reach_the_resolver_with_the_call_that_asked() -> None:
    asked: list[ElicitationRequest] = []

    async def resolver(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer.accept({"name": "Grace"})

    ctx = ToolContext(run_id="run-1", call_id="call-9", tool_name="greet")
    async with connect(greeter(), elicitation=resolver) as session:
        assert session.protocol_version == "2026-07-28"
        assert await call(session, "greet", ctx) == "hi Grace"
    (request,) = asked
    assert request.message == "Your name?"
    assert request.tool_name == "greet"
    assert request.call is ctx


@pytest.mark.parametrize("era", ERAS)
async def test_decline_elicitation_declines_in_both_eras(era: str) -> None:
    wrap, version = ERAS[era]
    async with connect(wrap(greeter()), elicitation=decline_elicitation) as session:
        assert session.protocol_version == version
        assert await call(session, "greet") == "no name (decline)"


@pytest.mark.parametrize("era", ERAS)
async def test_the_elicitation_capability_is_advertised_only_with_a_resolver(era: str) -> None:
    wrap, _ = ERAS[era]
    async with connect(wrap(greeter()), elicitation=decline_elicitation) as session:
        assert await call(session, "can_elicit") == "yes"
    async with connect(wrap(greeter())) as session:
        assert await call(session, "can_elicit") == "no"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("failure", ["raises", "returns-junk"])
async def test_a_resolver_that_fails_answers_cancel_in_both_eras(era: str, failure: str) -> None:
    async def broken(request: ElicitationRequest) -> Any:
        if failure == "raises":
            raise RuntimeError("no person at the keyboard")
        return {"name": "not an ElicitationAnswer"}

    wrap, _ = ERAS[era]
    async with connect(wrap(greeter()), elicitation=broken) as session:
        assert await call(session, "greet") == "no name (cancel)"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_list_change_reaches_the_callback_which_may_list_again(era: str) -> None:
    wrap, _ = ERAS[era]
    relisted: asyncio.Queue[list[str]] = asyncio.Queue()
    holder: list[Any] = []

    async def on_change() -> None:
        relisted.put_nowait([t.spec.name for t in await tools(holder[0])])

    async with connect(wrap(greeter()), on_tool_list_changed=on_change) as session:
        holder.append(session)
        assert await call(session, "change") == "changed"
        names = await asyncio.wait_for(relisted.get(), 5)
    assert names == ["greet", "can_elicit", "change"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_failing_tool_list_callback_does_not_break_the_session(era: str) -> None:
    wrap, _ = ERAS[era]
    fired = asyncio.Event()

    def on_change() -> None:
        fired.set()
        raise RuntimeError("callback bug")

    async with connect(wrap(greeter()), on_tool_list_changed=on_change) as session:
        await call(session, "change")
        await asyncio.wait_for(fired.wait(), 5)
        assert await call(session, "change") == "changed"


class ClientInfoSeen:
    """Server middleware noting the client name and version, whichever era carries them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        params = ctx.params or {}
        info = params.get("clientInfo") or (params.get("_meta") or {}).get(
            "io.modelcontextprotocol/clientInfo"
        )
        if info:
            self.seen.append((info["name"], info["version"]))
        return await call_next(ctx)


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_reports_bide_and_its_version_unless_told_otherwise(era: str) -> None:
    wrap, _ = ERAS[era]
    noted = ClientInfoSeen()
    server = MCPServer("noting", middleware=[noted])

    @server.tool()
    def act() -> str:
        return "ok"

    async with connect(wrap(server)) as session:
        await tools(session)
    assert set(noted.seen) == {("bide", runtime.__version__)}
    noted.seen.clear()
    async with connect(wrap(server), client_info=("my-host", "2.0")) as session:
        await tools(session)
    assert set(noted.seen) == {("my-host", "2.0")}


async def test_input_the_host_cannot_give_leaves_the_outcome_unknown() -> None:
    sampling = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text="summarise")
                )
            ],
            max_tokens=10,
        )
    )
    scripted = Scripted(
        answer=lambda params: types.InputRequiredResult(input_requests={"s": sampling})
    )
    async with connect(scripted.server, elicitation=decline_elicitation) as session:
        with pytest.raises(ToolOutcomeUnknown, match="could not give"):
            await call(session, "act")
    assert len(scripted.calls) == 1


async def test_a_server_asking_past_the_round_limit_leaves_the_outcome_unknown() -> None:
    ask = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message="again?", requested_schema={"type": "object", "properties": {}}
        )
    )
    scripted = Scripted(answer=lambda params: types.InputRequiredResult(input_requests={"q": ask}))
    async with connect(scripted.server, elicitation=decline_elicitation) as session:
        with pytest.raises(ToolOutcomeUnknown, match=f"past {MAX_INPUT_ROUNDS} rounds"):
            await call(session, "act")
    assert len(scripted.calls) == MAX_INPUT_ROUNDS + 1
    # Every round after the first carried the answers to the last one.
    assert all(c.input_responses for c in scripted.calls[1:])


class Prefs(BaseModel):
    name: str = "Ada"
    count: int = 3
    note: str | None = None


def ask_prefs() -> Elicit[Prefs]:
    return Elicit("Preferences?", Prefs)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("given", "seen"),
    [(None, "Ada 3"), ({}, "Ada 3"), ({"count": 5}, "Ada 5"), ({"name": "Lin"}, "Lin 3")],
)
async def test_an_accepted_form_gets_the_schemas_defaults_for_what_the_host_left_out(
    era: str, given: dict[str, Any] | None, seen: str
) -> None:
    """SEP-1034: a resolver that accepts without content accepts the defaults; what it gave
    wins over them."""
    server = MCPServer("prefs")

    @server.tool()
    def configure(prefs: Annotated[ElicitationResult[Prefs], Resolve(ask_prefs)]) -> str:
        assert isinstance(prefs, AcceptedElicitation)
        return f"{prefs.data.name} {prefs.data.count}"

    async def resolver(request: ElicitationRequest) -> ElicitationAnswer:
        return ElicitationAnswer.accept(given)

    wrap, _ = ERAS[era]
    async with connect(wrap(server), elicitation=resolver) as session:
        assert await call(session, "configure") == seen
