"""MCP server tools as bide tools; untrusted by default. See ``docs/mcp.md``."""

from adapters.mcp.auth import (
    AuthorizationError,
    CallNotAuthorized,
    HttpAuth,
    TokenProvider,
    client_credentials,
)
from adapters.mcp.connection import DEFAULT_CONNECT_TIMEOUT, Target, connect
from adapters.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationRequest,
    ElicitationResolver,
    decline_elicitation,
)
from adapters.mcp.listing import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_LIST_TIMEOUT,
    DEFAULT_MAX_DESCRIPTION_BYTES,
    DEFAULT_MAX_SCHEMA_BYTES,
    DEFAULT_MAX_TOOLS,
    MAX_LIST_PAGES,
    tools,
)
from adapters.mcp.session import MAX_INPUT_ROUNDS, Session, ToolListChangedCallback
from adapters.mcp.stdio import DEFAULT_MAX_LINE_BYTES
from adapters.mcp.tool import DEFAULT_MAX_RESULT_BYTES, IDEMPOTENCY_KEY_META, ResultTooLargeError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_LIST_TIMEOUT",
    "DEFAULT_MAX_DESCRIPTION_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_SCHEMA_BYTES",
    "DEFAULT_MAX_TOOLS",
    "IDEMPOTENCY_KEY_META",
    "MAX_INPUT_ROUNDS",
    "MAX_LIST_PAGES",
    "AuthorizationError",
    "CallNotAuthorized",
    "ElicitationAnswer",
    "ElicitationRequest",
    "ElicitationResolver",
    "HttpAuth",
    "ResultTooLargeError",
    "Session",
    "Target",
    "TokenProvider",
    "ToolListChangedCallback",
    "client_credentials",
    "connect",
    "decline_elicitation",
    "tools",
]
