"""Authorization: a server that needs it is reached with static headers, a token provider or the
SDK's OAuth client-credentials provider (discovery and token request included), refuses a
connection without it with a clear error naming the server, before any tool call, and bide still
tells a server's own error reply from a lost answer with authorization on.

Against a real server process over streamable HTTP (``auth_server``) with its own small
authorization server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.mcp import AuthorizationError, client_credentials, connect, tools
from runtime.errors import ConfigError, ToolError, ToolOutcomeUnknown
from runtime.tools import ToolContext, idempotency_key_for
from tests.adapters.mcp.processes import Serve, count, lines


def context(tool: str) -> ToolContext:
    return ToolContext(run_id="r", call_id="c1", tool_name=tool)


async def pay(url: str, **options: Any) -> Any:
    async with connect(url, name="payments", **options) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        return await by_name["pay"].call({"amount": 3}, context("pay"))


async def test_without_credentials_the_refusal_names_the_server_and_what_is_missing(
    serve: Serve,
) -> None:
    url, ledger = serve("auth_server")
    with pytest.raises(AuthorizationError) as raised:
        await pay(url)
    error = raised.value
    assert error.server == "payments" and error.status == 401
    assert "'payments' refused the connection with HTTP 401" in str(error)
    assert "needs authorization and none was given" in str(error)
    assert 'scope="payments"' in (error.challenge or "")
    assert count(ledger, "call") == 0  # before any tool call


async def test_a_token_without_the_scope_is_a_403_naming_the_scope(serve: Serve) -> None:
    url, ledger = serve("auth_server")
    with pytest.raises(AuthorizationError, match=r'HTTP 403.*lack scope "payments"') as raised:
        await pay(url, headers={"Authorization": "Bearer weak-token"})
    assert raised.value.status == 403
    assert "weak-token" not in str(raised.value)  # a credential is never shown
    assert count(ledger, "call") == 0


async def test_a_refused_token_says_the_credentials_were_refused(serve: Serve) -> None:
    url, _ = serve("auth_server")

    async def stale() -> str:
        return "expired-token"

    with pytest.raises(AuthorizationError, match="credentials given were refused") as raised:
        await pay(url, auth=stale)
    assert "expired-token" not in str(raised.value)


@pytest.mark.parametrize("how", ["headers", "token provider"])
async def test_static_headers_or_a_token_provider_authorize_every_request(
    serve: Serve, how: str
) -> None:
    url, ledger = serve("auth_server")

    async def provider() -> str:
        return "good-token"

    options: dict[str, Any] = (
        {"headers": {"Authorization": "Bearer good-token"}}
        if how == "headers"
        else {"auth": provider}
    )
    value = await pay(url, **options)
    assert value[0]["text"] == "paid 3"
    assert f"call pay {idempotency_key_for('r', 'c1')}" in lines(ledger)
    assert count(ledger, "mcp") >= 2 and "mcp 401" not in lines(ledger)


async def test_oauth_client_credentials_discover_the_server_and_get_a_token(
    serve: Serve,
) -> None:
    url, ledger = serve("auth_server")
    issuer = url.removesuffix("/mcp")
    auth = client_credentials(url, issuer=issuer, client_id="bide-client", client_secret="s3cret")
    value = await pay(url, auth=auth)
    assert value[0]["text"] == "paid 3"
    seen = lines(ledger)
    assert seen[0] == "mcp 401"  # the first request had no token
    assert any(line.startswith("metadata /.well-known/oauth-protected-resource") for line in seen)
    assert any(line.startswith("metadata /.well-known/oauth-authorization-server") for line in seen)
    assert count(ledger, "token") == 1  # one token, then kept for every later request
    assert count(ledger, "call") == 1


async def test_a_wrong_client_secret_is_an_authorization_error_before_any_call(
    serve: Serve,
) -> None:
    url, ledger = serve("auth_server")
    issuer = url.removesuffix("/mcp")
    auth = client_credentials(url, issuer=issuer, client_id="bide-client", client_secret="wrong")
    with pytest.raises(AuthorizationError, match="'payments'") as raised:
        await pay(url, auth=auth)
    assert "wrong" not in str(raised.value).replace("wrong, expired", "")
    assert count(ledger, "call") == 0


async def test_with_authorization_on_a_servers_error_reply_is_still_a_definite_failure(
    serve: Serve,
) -> None:
    """-32603 is also what the SDK makes up for a lost answer: only bide's witness of the
    server's bytes can tell, and it still sees them through the authorized client."""
    url, _ = serve("auth_server")
    async with connect(url, headers={"Authorization": "Bearer good-token"}) as session:
        (refuse,) = [t for t in await tools(session) if t.spec.name == "refuse"]
        with pytest.raises(ToolError) as raised:
            await refuse.call({}, context("refuse"))
    assert not isinstance(raised.value, ToolOutcomeUnknown)
    assert "declined by the server" in str(raised.value)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"headers": {"Bad Name": "x"}}, "not an HTTP header name"),
        ({"headers": {"Authorization": "Bearer a\r\nX-Evil: 1"}}, "value not shown"),
        ({"auth": "a token"}, "auth must be an async function"),
        ({"protocol_version": "2024-01-01"}, "protocol_version must be one of"),
    ],
)
async def test_bad_auth_options_are_config_errors(
    options: dict[str, Any], said: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=said):
        async with connect("http://127.0.0.1:9/mcp", **options):
            pass


async def test_headers_on_a_target_that_is_not_a_url_are_a_config_error() -> None:
    from tests.adapters.mcp.task_server import Tasks, task_server

    with pytest.raises(ConfigError, match="apply to an http"):
        async with connect(task_server(Tasks(None, seconds=0)), headers={"X-Key": "k"}):
            pass
