"""A server's tool list read and checked at the boundary: every page followed (bounded), each
tool's name, schemas and description checked, its Safety read from annotations only when the
host trusts them, and each wrapped as a bide ``MCPTool``. One bad entry refuses the whole list.
``listing.tools`` runs it, bounded in time, the checks in a worker thread."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
import pydantic
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.validators import validator_for
from mcp import MCPError
from referencing import Registry

from adapters.mcp.link import Link, brief_validation
from runtime.approval import ApprovalPolicy
from runtime.errors import ConfigError, ProtocolError
from runtime.tools import Safety, ToolSpec, safe_repr, validate_tool_name

__all__ = ["MAX_LIST_PAGES", "Limits", "Stopped", "list_all", "prepare"]

MAX_LIST_PAGES: Final = 1000
"""Pages of ``tools/list`` followed before the listing is called a protocol error."""


async def list_all(link: Link, server: str, limit: int) -> list[types.Tool]:
    listed: list[types.Tool] = []
    cursors: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await _list_page(link, cursor)
        listed.extend(page.tools)
        if 0 < limit < len(listed):
            raise ProtocolError(
                f"MCP server {server!r} lists more than {limit} tools (max_tools); "
                "the whole list is refused"
            )
        cursor = page.next_cursor
        if cursor is None:
            return listed
        if cursor in cursors:
            raise ProtocolError(
                f"MCP server {server!r} repeated the tools/list cursor {safe_repr(cursor)}; "
                "following it would never end"
            )
        cursors.add(cursor)
    raise ProtocolError(f"MCP server {server!r}'s tools/list went past {MAX_LIST_PAGES} pages")


async def _list_page(link: Link, cursor: str | None) -> types.ListToolsResult:
    sdk = link.connected()
    if link.closed:
        raise ProtocolError(f"cannot list tools: the MCP session is closed{link.why()}")
    try:
        return await sdk.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    except MCPError as exc:
        link.note_failure(exc)
        if link.failure is not None:
            raise ProtocolError(f"tools/list failed: {link.failure}") from exc
        raise ProtocolError(
            f"MCP server failed tools/list: {safe_repr(exc.error.message, 200)} "
            f"(JSON-RPC error {exc.error.code})"
        ) from exc
    except pydantic.ValidationError as exc:
        raise ProtocolError(
            f"MCP server sent a tools/list answer that does not follow the protocol: "
            f"{brief_validation(exc)}"
        ) from exc
    except Exception as exc:
        raise ProtocolError(
            f"tools/list failed: {type(exc).__name__}: {safe_repr(str(exc), 200)}"
        ) from exc


@dataclass(frozen=True, slots=True)
class Limits:
    call_timeout: float | None
    tools: int
    schema_bytes: int
    description_bytes: int


class Stopped(Exception):
    """The listing's bound passed while its worker was checking: the result is not wanted."""


def prepare(
    listed: list[types.Tool],
    server: str,
    limits: Limits,
    stop: threading.Event,
    safety_of: Mapping[str, Safety],
    approval_of: Mapping[str, ApprovalPolicy],
    trusted: bool,
) -> list[tuple[ToolSpec, Any]]:
    """Check every listed tool and build its spec and argument validator (in a worker thread)."""
    seen: set[str] = set()
    prepared: list[tuple[ToolSpec, Any]] = []
    for tool in listed:
        if stop.is_set():
            raise Stopped
        _check_tool(tool, seen, server, limits)
        seen.add(tool.name)
        annotations = tool.annotations
        spec = ToolSpec(
            name=tool.name,
            title=tool.title or (annotations.title if annotations else None),
            description=tool.description or "",
            input_schema=copy.deepcopy(tool.input_schema),
            output_schema=copy.deepcopy(tool.output_schema),
            safety=safety_of.get(tool.name, _annotated_safety(tool, trusted)),
            approval=approval_of.get(tool.name),
            timeout=limits.call_timeout,
        )
        validator = validator_for(spec.input_schema)(spec.input_schema, registry=Registry())
        prepared.append((spec, validator))
    return prepared


def _check_tool(tool: types.Tool, seen: set[str], server: str, limits: Limits) -> None:
    try:
        validate_tool_name(tool.name)
    except ConfigError:
        raise ProtocolError(
            f"MCP server {server!r} listed a tool named {safe_repr(tool.name)}, outside the MCP "
            "grammar (1 to 128 of A-Z a-z 0-9 _ - .); the whole list is refused"
        ) from None
    name = tool.name
    if name in seen:
        raise ProtocolError(
            f"MCP server {server!r} listed two tools named {name}; the whole list is refused"
        )
    if not _is_object_schema(tool.input_schema):
        raise ProtocolError(
            f"MCP server {server!r} listed {name} whose input schema is not an object schema"
        )
    if tool.output_schema is not None and not _is_object_schema(tool.output_schema):
        raise ProtocolError(
            f"MCP server {server!r} listed {name} whose output schema is not an object schema"
        )
    size = len((tool.description or "").encode())
    if 0 < limits.description_bytes < size:
        raise ProtocolError(
            f"MCP server {server!r} listed {name} with a {size}-byte description, over the "
            f"{limits.description_bytes}-byte limit; the whole list is refused"
        )
    for which, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
        if schema is None:
            continue
        # Measured before it is checked: checking a schema of megabytes takes seconds.
        if limits.schema_bytes > 0:
            size = _json_bytes(schema, server, name, which)
            if size > limits.schema_bytes:
                raise ProtocolError(
                    f"MCP server {server!r} listed {name} with a {size}-byte {which} schema, "
                    f"over the {limits.schema_bytes}-byte limit (max_schema_bytes); the whole "
                    "list is refused"
                )
        try:
            validator_for(schema).check_schema(schema)
        except jsonschema_exceptions.SchemaError as exc:
            raise ProtocolError(
                f"MCP server {server!r} listed {name} with an invalid {which} schema: "
                f"{_clip(exc.message)}"
            ) from exc
        except RecursionError:
            raise ProtocolError(
                f"MCP server {server!r} listed {name} with an {which} schema nested too deep "
                "to check"
            ) from None


def _json_bytes(schema: object, server: str, name: str, which: str) -> int:
    try:
        return len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())
    except (RecursionError, TypeError, ValueError):
        raise ProtocolError(
            f"MCP server {server!r} listed {name} with an {which} schema that cannot be "
            "measured as JSON (nested too deep, or not JSON)"
        ) from None


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _annotated_safety(tool: types.Tool, trusted: bool) -> Safety:
    hints = tool.annotations
    if not trusted or hints is None:
        return Safety.SIDE_EFFECT
    if hints.read_only_hint is True:
        return Safety.READ_ONLY
    # destructiveHint does not weaken idempotentHint: a repeat with the same arguments has no
    # additional effect (deleting a file twice is one deletion), which is all a retry needs.
    if hints.idempotent_hint is True:
        return Safety.IDEMPOTENT
    return Safety.SIDE_EFFECT


def _is_object_schema(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "object"
