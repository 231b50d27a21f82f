"""OAuth for the conformance suite's auth scenarios: the SDK's providers, built from what the
harness hands the client (MCP_CONFORMANCE_CONTEXT), given to bide's ``connect(url, auth=...)``.

Headless: the authorization endpoint's redirect is read from its Location header instead of a
browser, and its code, state and issuer are handed back as the redirect URI would receive them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from adapters.mcp.auth import MemoryTokenStorage

REDIRECT = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


class Redirect:
    """Follows the authorization URL once and keeps what the redirect carried."""

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"the authorization endpoint answered {response.status_code}")
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            raise RuntimeError("the authorization redirect carried no code")
        self._result = AuthorizationCodeResult(
            code=query["code"][0],
            state=(query.get("state") or [None])[0],
            iss=(query.get("iss") or [None])[0],
        )

    async def received(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise RuntimeError("no authorization redirect was received")
        result, self._result = self._result, None
        return result


def _issuer(url: str) -> str | None:
    """The first authorization server the MCP server's protected-resource metadata names."""
    from mcp.client.auth.utils import build_protected_resource_metadata_discovery_urls

    for where in build_protected_resource_metadata_discovery_urls(None, url):
        try:
            response = httpx2.get(where, timeout=30)
        except httpx2.HTTPError:
            continue
        if response.status_code == 200:
            servers = response.json().get("authorization_servers") or []
            return str(servers[0]) if servers else None
    return None


async def auth_for(url: str, scenario: str, ctx: dict[str, Any]) -> httpx2.Auth:
    storage = MemoryTokenStorage()
    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=ctx["client_id"],
            client_secret=ctx["client_secret"],
            issuer=_issuer(url),
        )
    if scenario == "auth/client-credentials-jwt":
        signed = SignedJWTParameters(
            issuer=ctx["client_id"],
            subject=ctx["client_id"],
            signing_algorithm=ctx.get("signing_algorithm", "ES256"),
            signing_key=ctx["private_key_pem"],
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=ctx["client_id"],
            assertion_provider=signed.create_assertion_provider(),
            issuer=_issuer(url),
        )
    if scenario in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        return _identity_assertion(url, ctx, storage)
    # Every other auth scenario: the authorization-code flow with PKCE (and refresh).
    if ctx.get("client_id"):
        info = OAuthClientInformationFull(
            client_id=ctx["client_id"],
            client_secret=ctx.get("client_secret"),
            redirect_uris=[AnyUrl(REDIRECT)],
            token_endpoint_auth_method=(
                "client_secret_basic" if ctx.get("client_secret") else "none"
            ),
        )
        await storage.set_client_info(info)  # pre-registered: the storage starts with it
    redirect = Redirect()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="bide-conformance",
            redirect_uris=[AnyUrl(REDIRECT)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=redirect.open,
        callback_handler=redirect.received,
        client_metadata_url=CLIENT_METADATA_URL,
    )


def _identity_assertion(url: str, ctx: dict[str, Any], storage: MemoryTokenStorage) -> httpx2.Auth:
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

    issuer = _issuer(url)

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(
                ctx["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": ctx["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": ctx["idp_client_id"],
                },
            )
            return str(response.raise_for_status().json()["access_token"])

    return IdentityAssertionOAuthProvider(
        server_url=url,
        storage=storage,
        client_id=ctx["client_id"],
        client_secret=ctx["client_secret"],
        issuer=issuer,
        assertion_provider=id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )
