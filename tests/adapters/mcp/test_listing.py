"""tools(): every page is read, and a list that breaks the protocol is refused whole."""

from __future__ import annotations

from typing import Any

import mcp.types as types
import pytest
from mcp.server import Server

from adapters.mcp import DEFAULT_MAX_DESCRIPTION_BYTES, MAX_LIST_PAGES, connect, tools
from runtime import ConfigError, ProtocolError, single_approval
from runtime.approval import ApprovalPolicy
from tests.adapters.mcp.kit import OBJECT, RawServer


def paged_server(pages: dict[str | None, tuple[list[types.Tool], str | None]]) -> Server[Any]:
    """A low-level server whose tools/list answers ``pages[cursor]`` as (tools, next cursor)."""
    asked: list[str | None] = []

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params else None
        asked.append(cursor)
        listed, next_cursor = pages[cursor]
        return types.ListToolsResult(tools=listed, next_cursor=next_cursor)

    server: Server[Any] = Server("paged", on_list_tools=list_tools)
    server.asked = asked  # type: ignore[attr-defined]
    return server


def tool(name: str = "t", **fields: Any) -> types.Tool:
    fields.setdefault("input_schema", OBJECT)
    return types.Tool(name=name, **fields)


def one_page(*listed: types.Tool) -> Server[Any]:
    return paged_server({None: (list(listed), None)})


async def listed_names(server: Any, **options: Any) -> list[str]:
    async with connect(server) as session:
        return [t.spec.name for t in await tools(session, **options)]


async def test_every_page_is_followed_by_its_cursor() -> None:
    server = paged_server(
        {
            None: ([tool("a")], "p2"),
            "p2": ([tool("b"), tool("c")], "p3"),
            "p3": ([tool("d")], None),
        }
    )
    assert await listed_names(server) == ["a", "b", "c", "d"]
    assert server.asked == [None, "p2", "p3"]  # type: ignore[attr-defined]


async def test_a_repeated_cursor_is_a_protocol_error() -> None:
    server = paged_server({None: ([tool("a")], "p2"), "p2": ([tool("b")], "p2")})
    with pytest.raises(ProtocolError, match="repeated the tools/list cursor"):
        await listed_names(server)


async def test_pages_past_the_bound_are_a_protocol_error() -> None:
    asked = 0

    async def endless(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        nonlocal asked
        asked += 1
        return types.ListToolsResult(tools=[], next_cursor=f"page-{asked}")

    with pytest.raises(ProtocolError, match=f"past {MAX_LIST_PAGES} pages"):
        await listed_names(Server("endless", on_list_tools=endless))
    assert asked == MAX_LIST_PAGES


@pytest.mark.parametrize(
    "name",
    ["", "has space", "x" * 129, "naïve", "slash/name", "semi;colon"],
    ids=["empty", "space", "129-chars", "non-ascii", "slash", "semicolon"],
)
async def test_a_name_outside_the_mcp_grammar_refuses_the_whole_list(name: str) -> None:
    with pytest.raises(ProtocolError, match="outside the MCP grammar"):
        await listed_names(one_page(tool("fine"), tool(name)))


async def test_names_at_the_edges_of_the_grammar_are_accepted() -> None:
    names = ["a", "x" * 128, "A-Z_a.z-09"]
    assert await listed_names(one_page(*(tool(n) for n in names))) == names


@pytest.mark.parametrize(
    "name",
    ["bad\nname", "bad\x1b[31mred", "bad\u202eevil", "x\u2066y", "z" * 5000],
    ids=["newline", "escape", "bidi-override", "bidi-isolate", "long"],
)
async def test_a_bad_name_is_quoted_safely_in_the_error(name: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        await listed_names(one_page(tool(name)))
    message = str(caught.value)
    assert all(0x20 <= ord(c) < 0x7F for c in message), message
    assert len(message) < 300


async def test_two_tools_sharing_a_name_refuse_the_list() -> None:
    with pytest.raises(ProtocolError, match="two tools named twin"):
        await listed_names(one_page(tool("twin"), tool("other"), tool("twin")))


async def test_duplicates_across_pages_refuse_the_list() -> None:
    server = paged_server({None: ([tool("twin")], "p2"), "p2": ([tool("twin")], None)})
    with pytest.raises(ProtocolError, match="two tools named twin"):
        await listed_names(server)


async def test_a_missing_input_schema_refuses_the_list() -> None:
    raw = RawServer(tools=[{"name": "fine", "inputSchema": OBJECT}, {"name": "bare"}])
    with pytest.raises(ProtocolError, match="inputSchema"):
        await listed_names(raw.transport())


@pytest.mark.parametrize(
    "schema",
    [{"type": "string"}, {"properties": {}}, {"type": ["object", "null"]}],
    ids=["string", "no-type", "type-list"],
)
async def test_an_input_schema_that_is_not_an_object_schema_refuses_the_list(
    schema: dict[str, Any],
) -> None:
    raw = RawServer(tools=[{"name": "odd", "inputSchema": schema}])
    with pytest.raises(ProtocolError, match=r"input schema is not an object schema|inputSchema"):
        await listed_names(raw.transport())


@pytest.mark.parametrize("era", ["handshake", "2026"])
async def test_an_output_schema_that_is_not_an_object_schema_refuses_the_list(era: str) -> None:
    # 2026-07-28 allows any JSON Schema as an output schema; bide needs an object schema.
    array = {"type": "array", "items": {"type": "string"}}
    if era == "2026":
        target: Any = one_page(tool("fine"), tool("odd", output_schema=array))
    else:
        raw = RawServer(tools=[{"name": "odd", "inputSchema": OBJECT, "outputSchema": array}])
        target = raw.transport()
    with pytest.raises(ProtocolError, match=r"output schema is not an object schema|outputSchema"):
        await listed_names(target)


async def test_a_null_output_schema_means_none() -> None:
    raw = RawServer(tools=[{"name": "plain", "inputSchema": OBJECT, "outputSchema": None}])
    async with connect(raw.transport()) as session:
        (only,) = await tools(session)
    assert only.spec.output_schema is None


@pytest.mark.parametrize("which", ["input", "output"])
async def test_an_invalid_schema_refuses_the_list(which: str) -> None:
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    with pytest.raises(ProtocolError, match=f"invalid {which} schema"):
        await listed_names(one_page(tool("odd", **{f"{which}_schema": bad})))


async def test_a_description_over_the_limit_refuses_the_list() -> None:
    long = "d" * (DEFAULT_MAX_DESCRIPTION_BYTES + 1)
    with pytest.raises(
        ProtocolError, match=f"{DEFAULT_MAX_DESCRIPTION_BYTES + 1}-byte description"
    ):
        await listed_names(one_page(tool("wordy", description=long)))


async def test_a_description_of_exactly_the_limit_is_accepted() -> None:
    exact = "d" * DEFAULT_MAX_DESCRIPTION_BYTES
    assert await listed_names(one_page(tool("wordy", description=exact))) == ["wordy"]


async def test_the_description_limit_counts_utf8_bytes_not_characters() -> None:
    server = one_page(tool("wordy", description="é" * 6))  # 6 characters, 12 bytes
    with pytest.raises(ProtocolError, match="12-byte description"):
        await listed_names(server, max_description_bytes=11)
    assert await listed_names(server, max_description_bytes=12) == ["wordy"]


@pytest.mark.parametrize("limit", [0, -1])
async def test_a_description_limit_of_zero_or_less_removes_the_limit(limit: int) -> None:
    huge = "d" * (DEFAULT_MAX_DESCRIPTION_BYTES * 4)
    assert await listed_names(
        one_page(tool("wordy", description=huge)), **{"max_description_bytes": limit}
    ) == ["wordy"]


@pytest.mark.parametrize("option", ["safety", "approval"])
async def test_an_unlisted_name_in_safety_or_approval_is_a_config_error(option: str) -> None:
    from runtime import Safety

    value = Safety.READ_ONLY if option == "safety" else single_approval()
    with pytest.raises(ConfigError, match="lists no tool of that name"):
        await listed_names(one_page(tool("delete_file")), **{option: {"delete_fiel": value}})


@pytest.mark.parametrize("policy", [None, "yes", {"need": 1}], ids=["none", "string", "dict"])
async def test_an_invalid_approval_policy_is_a_config_error(policy: Any) -> None:
    with pytest.raises(ConfigError, match="must be an ApprovalPolicy"):
        await listed_names(one_page(tool("gate")), approval={"gate": policy})


async def test_a_policy_broken_after_it_was_built_is_a_config_error() -> None:
    policy = single_approval()
    object.__setattr__(policy, "need", 5)  # what validation at build time can no longer see
    with pytest.raises(ConfigError, match="need must be between"):
        await listed_names(one_page(tool("gate")), approval={"gate": policy})


async def test_the_approval_policy_is_copied_into_the_spec() -> None:
    policy = single_approval()
    async with connect(one_page(tool("gate"), tool("free"))) as session:
        gated, free = await tools(session, approval={"gate": policy})
    assert isinstance(gated.spec.approval, ApprovalPolicy)
    assert gated.spec.approval == policy
    assert gated.spec.approval is not policy
    assert free.spec.approval is None


async def test_the_spec_carries_the_servers_description_and_schemas() -> None:
    out = {"type": "object", "properties": {"n": {"type": "integer"}}}
    inp = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    listed = tool("search", description="Find things.", input_schema=inp, output_schema=out)
    async with connect(one_page(listed)) as session:
        (only,) = await tools(session)
    assert only.spec.description == "Find things."
    assert only.spec.input_schema == inp
    assert only.spec.output_schema == out


async def test_the_title_is_the_tools_title_else_its_annotations_title() -> None:
    server = one_page(
        tool("both", title="Own", annotations=types.ToolAnnotations(title="Hint")),
        tool("hint", annotations=types.ToolAnnotations(title="Hint")),
        tool("none"),
    )
    async with connect(server) as session:
        titles = [t.spec.title for t in await tools(session)]
    assert titles == ["Own", "Hint", None]


@pytest.mark.parametrize(
    ("given", "expected"), [(None, None), (2.5, 2.5), (0, None), (-1, None), (3, 3.0)]
)
async def test_the_spec_timeout_is_the_call_timeout_and_zero_or_less_means_none(
    given: float | None, expected: float | None
) -> None:
    async with connect(one_page(tool("slow"))) as session:
        (only,) = await tools(session, call_timeout=given)
    assert only.spec.timeout == expected


async def test_a_session_from_another_library_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a session"):
        await tools(object())  # type: ignore[arg-type]
