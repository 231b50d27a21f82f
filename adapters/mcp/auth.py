"""Authorization for MCP servers reached over HTTP: static headers, a token provider, or the SDK's
OAuth client support (discovery of the protected resource's and the authorization server's
metadata, PKCE, refresh, client credentials), and a clear error when a server refuses.

Credentials live in the HTTP client only: never in an error text, a log line or the journal.
An error names the server and what is missing, never a header's value or a token.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import httpx2
from mcp.client.auth import TokenStorage
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from runtime.errors import ConfigError, ProtocolError, ToolError
from runtime.tools import safe_repr

__all__ = [
    "AuthorizationError",
    "CallNotAuthorized",
    "HttpAuth",
    "HttpOptions",
    "MemoryTokenStorage",
    "TokenProvider",
    "call_refused",
    "check_headers",
    "client_credentials",
    "http_auth",
    "principal_of",
]

TokenProvider: TypeAlias = Callable[[], Awaitable[str]]
"""An async function returning the bearer token to send (bide adds ``Authorization: Bearer``).
Called before every HTTP request: cache the token, and refresh it, on your side."""

HttpAuth: TypeAlias = httpx2.Auth | TokenProvider
"""What ``connect``'s ``auth`` takes: a ``TokenProvider``, or an ``httpx2.Auth`` such as the SDK's
OAuth providers (``mcp.client.auth.OAuthClientProvider`` for the authorization-code flow with
PKCE, ``ClientCredentialsOAuthProvider``; see ``client_credentials``)."""

_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_MAX_TOKEN_CHARS: Final = 16 << 10


class AuthorizationError(ProtocolError):
    """An MCP server refused the connection (HTTP 401 or 403), or authorizing failed.

    ``server`` names the server; ``status`` is the HTTP status (``None`` when the OAuth flow
    itself failed); ``challenge`` the server's ``WWW-Authenticate`` header, if it sent one.
    """

    def __init__(
        self, message: str, *, server: str, status: int | None, challenge: str | None
    ) -> None:
        super().__init__(message)
        self.server = server
        self.status = status
        self.challenge = challenge


@dataclass(slots=True)
class Refusal:
    """The latest 401 or 403 the MCP endpoint answered, kept until it answers a request."""

    status: int | None = None
    challenge: str | None = None

    def seen(self, url: str, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        if not _same_endpoint(url, endpoint):
            return
        if status in (401, 403):
            self.status, self.challenge = status, headers.get("www-authenticate")
        elif status < 400:
            self.status, self.challenge = None, None


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """What ``connect`` was told for a URL: headers, the authorizer, and where refusals go."""

    headers: dict[str, str]
    auth: httpx2.Auth | None
    refusal: Refusal


def refused(
    refusal: Refusal, failure: BaseException, *, server: str, credentials: bool
) -> AuthorizationError | None:
    """The error to raise when opening a session failed, if it failed for want of authorization."""
    problem = _oauth_failure(failure)
    if isinstance(problem, OAuthFlowError):
        return AuthorizationError(
            f"MCP server {server!r}: authorizing failed ({type(problem).__name__}: "
            f"{safe_repr(str(problem), 300)}); no tool was called",
            server=server,
            status=None,
            challenge=None,
        )
    if refusal.status is None:
        return None
    challenge = refusal.challenge
    return AuthorizationError(
        f"MCP server {server!r} refused the connection with HTTP {refusal.status}"
        f"{_said(challenge)}: {_missing(refusal.status, challenge, credentials)}; "
        "no tool was called",
        server=server,
        status=refusal.status,
        challenge=challenge,
    )


class CallNotAuthorized(AuthorizationError, ToolError):
    """A tool call the server refused with HTTP 401 or 403 after the session was open (a token
    that expired or was revoked, a scope the tool needs): the status came back for the call's
    own request, so the server refused it before acting. A definite failure: the tool did not
    run (a ``ToolError``, and an ``AuthorizationError`` naming the server and what is missing).
    """


def call_refused(
    tool: str,
    status: int,
    challenge: str | None,
    *,
    server: str,
    credentials: bool,
    ids: Mapping[str, str],
) -> CallNotAuthorized:
    """The error for a tools/call whose own request the server answered 401 or 403."""
    refused_call = CallNotAuthorized(
        f"MCP server {server!r} refused the call of {tool} with HTTP {status}{_said(challenge)}: "
        f"{_missing(status, challenge, credentials)}; the tool was not called",
        server=server,
        status=status,
        challenge=challenge,
    )
    refused_call.run_id, refused_call.call_id = ids.get("run_id"), ids.get("call_id")
    return refused_call


def principal_of(principal: object, auth: object) -> Callable[[], str | None]:
    """Who calls are made as, asked at each call: ``connect``'s ``principal`` if given, else
    the authorizer's own ``principal`` attribute (a string, or ``None`` while it cannot tell;
    ``client_credentials`` names its client id), else nobody named. Never a credential."""
    if principal is not None:
        if not isinstance(principal, str) or not principal:
            raise ConfigError("principal must be a non-empty string or None")
        return lambda: principal
    if auth is None or not hasattr(auth, "principal"):
        return lambda: None

    def told() -> str | None:
        named = getattr(auth, "principal", None)
        return named[:200] if isinstance(named, str) and named else None

    return told


def check_headers(headers: object) -> dict[str, str]:
    """``connect``'s ``headers``: names and values that can go on the wire as they are."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ConfigError("headers must map header names to string values")
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ConfigError(f"headers: {safe_repr(name)} is not an HTTP header name")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            # The value is a credential, most likely: named, never shown.
            raise ConfigError(f"headers[{name!r}] must be a string on one line (value not shown)")
        checked[name] = value
    return checked


def http_auth(auth: object) -> httpx2.Auth | None:
    """``connect``'s ``auth``: an ``httpx2.Auth`` as it is, a token provider wrapped in one."""
    if auth is None or isinstance(auth, httpx2.Auth):
        return auth
    if callable(auth):
        return _Bearer(auth)
    raise ConfigError(
        "auth must be an async function returning a bearer token, or an httpx2.Auth such as "
        f"the SDK's OAuth providers, not {type(auth).__name__}"
    )


def client_credentials(
    url: str,
    *,
    issuer: str,
    client_id: str,
    client_secret: str,
    scope: str | None = None,
    storage: TokenStorage | None = None,
) -> httpx2.Auth:
    """The OAuth client-credentials grant (machine to machine), through the SDK's provider.

    It discovers the server's protected-resource and authorization-server metadata, asks for a
    token and sends it. ``issuer`` is the authorization server's issuer URL: the credentials go
    to that server only, whichever one the MCP server names. ``storage`` keeps tokens
    (``MemoryTokenStorage`` unless given: one per process); bide never journals them.
    """
    for what, value in (
        ("issuer", issuer),
        ("client_id", client_id),
        ("client_secret", client_secret),
    ):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"client_credentials needs a non-empty {what}")
    return _ClientCredentials(
        server_url=url,
        storage=storage if storage is not None else MemoryTokenStorage(),
        client_id=client_id,
        client_secret=client_secret,
        scope=scope,
        issuer=issuer,
    )


class _ClientCredentials(ClientCredentialsOAuthProvider):
    """The SDK's client-credentials provider, naming its client id as the principal."""

    def __init__(self, *, client_id: str, **options: Any) -> None:
        super().__init__(client_id=client_id, **options)
        self.principal = client_id


class MemoryTokenStorage(TokenStorage):
    """Tokens and the registered client kept in this process's memory (the SDK's
    ``TokenStorage``): the simplest pluggable storage; a host that wants tokens to survive a
    restart passes its own (a keychain, a secrets manager)."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info

    def __repr__(self) -> str:
        return "<MemoryTokenStorage>"  # never the tokens


class _Bearer(httpx2.Auth):
    """Sends the token provider's token as ``Authorization: Bearer``."""

    def __init__(self, provider: Callable[[], Any]) -> None:
        self._provider = provider

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = self._provider()
        if inspect.isawaitable(token):
            token = await token
        if (
            not isinstance(token, str)
            or not token
            or len(token) > _MAX_TOKEN_CHARS
            or not token.isascii()
            or not token.isprintable()
            or " " in token
        ):
            raise ConfigError(
                "the token provider must return a bearer token: 1 to "
                f"{_MAX_TOKEN_CHARS} printable ASCII characters without spaces (value not shown)"
            )
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


def _oauth_failure(failure: BaseException) -> BaseException:
    """The OAuth failure behind ``failure``, if one is (the SDK may wrap it), else ``failure``."""
    seen: BaseException | None = failure
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, OAuthFlowError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return failure


def _said(challenge: str | None) -> str:
    return f" (WWW-Authenticate: {safe_repr(challenge, 300)})" if challenge else ""


def _missing(status: int, challenge: str | None, credentials: bool) -> str:
    """What the server's 401 or 403 says is missing (never a credential)."""
    if status == 403:
        scope = _param(challenge, "scope")
        lacks = f" scope {safe_repr(scope)}" if scope else " permission for this resource"
        return f"the credentials given lack{lacks}"
    if credentials:
        return (
            "the credentials given were refused (wrong, expired, revoked or for another resource)"
        )
    return (
        "it needs authorization and none was given: pass auth= (a token provider or the "
        "SDK's OAuth provider) or headers= to connect, or auth in the agent file"
    )


def _param(challenge: str | None, name: str) -> str | None:
    if not challenge:
        return None
    found = re.search(rf'{name}="([^"]*)"', challenge) or re.search(rf"{name}=([^,\s]+)", challenge)
    return found.group(1) if found else None


def _same_endpoint(url: str, endpoint: str) -> bool:
    return url.split("?", 1)[0].rstrip("/") == endpoint.split("?", 1)[0].rstrip("/")
