"""Authorization seen from a call: the journal records which server a side effect went to and as
whom (never the token), and a token revoked after connecting makes the server's 401 or 403 to
the call's own request a definite "not executed", named as an authorization error.

Against a real server process over streamable HTTP (``auth_server``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from adapters.mcp import AuthorizationError, ElicitationAnswer, client_credentials, connect, tools
from adapters.mcp.auth import CallNotAuthorized
from runtime import Agent, Journal, RunStatus, Safety
from runtime import records as R
from runtime.errors import ToolError, ToolOutcomeUnknown
from runtime.testing import ScriptedModel
from runtime.tools import ToolContext
from tests.adapters.mcp.processes import Serve, count, lines
from tests.cli.invoke import child

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "pay", "arguments": {"amount": 4}}]},
    {"text": "done"},
]


async def revoke(url: str, token: str, to: str = "none") -> None:
    async with httpx2.AsyncClient() as client:
        answer = await client.post(
            url.removesuffix("/mcp") + "/revoke", data={"token": token, "to": to}
        )
    assert answer.status_code == 204


async def drive(
    db: Path, url: str, *, revoked: str | None = None, **options: Any
) -> tuple[Any, Any]:
    async with connect(url, name="payments", **options) as session:
        listed = await tools(session, safety={"pay": Safety.SIDE_EFFECT})
        if revoked is not None:
            await revoke(url, revoked)  # after connecting: the session is open and listed
        agent = Agent(model=ScriptedModel(SCRIPT), tools=listed)
        async with Journal(db) as journal:
            result = await agent.run("r", "pay", journal=journal)
            state = await journal.require("r")
    return result, state


@pytest.mark.parametrize("how", ["client credentials", "headers and principal"])
async def test_a_side_effect_journals_its_server_and_principal_and_never_the_token(
    serve: Serve, db_path: Path, how: str
) -> None:
    url, ledger = serve("auth_server")
    options: dict[str, Any]
    if how == "client credentials":
        issuer = url.removesuffix("/mcp")
        auth = client_credentials(
            url, issuer=issuer, client_id="bide-client", client_secret="s3cret"
        )
        options, principal, secrets = {"auth": auth}, "bide-client", ["s3cret", "cc-token-"]
    else:
        headers = {"Authorization": "Bearer good-token"}
        options = {"headers": headers, "principal": "ops@example.com"}
        principal, secrets = "ops@example.com", ["good-token"]
    result, state = await drive(db_path, url, **options)
    assert result.status is RunStatus.COMPLETED
    assert count(ledger, "call") == 1
    (step,) = state.calls["c1"].handles[1].values()
    assert step.payload["in_flight"] is True  # journaled before the request left
    assert step.payload["handle"] == {"mcp_call": {"server": "payments", "principal": principal}}
    journaled = json.dumps([r.payload for r in state.records])
    for secret in secrets:
        assert secret not in journaled
    shown = child("show", "--db", str(db_path), "r")
    assert shown.code == 0, shown.err
    assert "payments" in shown.out and principal in shown.out
    for secret in secrets:
        assert secret not in shown.out


async def test_without_a_principal_the_server_is_still_journaled(
    serve: Serve, db_path: Path
) -> None:
    url, _ = serve("auth_server")

    async def provider() -> str:
        return "good-token"

    result, state = await drive(db_path, url, auth=provider)
    assert result.status is RunStatus.COMPLETED
    (step,) = state.calls["c1"].handles[1].values()
    assert step.payload["handle"] == {"mcp_call": {"server": "payments", "principal": None}}
    assert "good-token" not in json.dumps([r.payload for r in state.records])


@pytest.mark.parametrize(
    ("to", "status", "said"),
    [
        ("none", 401, "credentials given were refused"),
        ("weak", 403, 'lack scope "payments"'),
    ],
)
async def test_a_token_revoked_after_connecting_refuses_the_call_before_it_runs(
    serve: Serve, to: str, status: int, said: str
) -> None:
    url, ledger = serve("auth_server")

    async def provider() -> str:
        return "temp-token"

    async with connect(url, name="payments", auth=provider) as session:
        (pay,) = [t for t in await tools(session) if t.spec.name == "pay"]
        await revoke(url, "temp-token", to)
        context = ToolContext(run_id="r", call_id="c1", tool_name="pay")
        with pytest.raises(AuthorizationError) as raised:
            await pay.call({"amount": 3}, context)
    error = raised.value
    assert isinstance(error, CallNotAuthorized) and isinstance(error, ToolError)
    assert not isinstance(error, ToolOutcomeUnknown)  # a definite "not executed"
    assert error.server == "payments" and error.status == status
    assert f"'payments' refused the call of pay with HTTP {status}" in str(error)
    assert said in str(error) and "the tool was not called" in str(error)
    assert error.call_id == "c1" and "temp-token" not in str(error)
    assert count(ledger, "call") == 0  # the server never ran it


async def test_a_revoked_token_in_a_run_records_the_refusal_and_does_not_halt(
    serve: Serve, db_path: Path
) -> None:
    url, ledger = serve("auth_server")

    async def provider() -> str:
        return "temp-token"

    result, state = await drive(db_path, url, auth=provider, revoked="temp-token")
    assert result.status is RunStatus.COMPLETED and not result.halts
    content, is_error = state.calls["c1"].message_content()
    assert is_error and "refused the call of pay with HTTP 401" in json.dumps(content)
    assert [r.kind for r in state.records if r.kind == R.HALT] == []
    assert count(ledger, "call") == 0


async def test_a_refusal_the_oauth_provider_recovers_from_does_not_count(serve: Serve) -> None:
    """The provider answers the 401 by getting a new token and sending the same request again:
    the server's answer to that one is the call's outcome, here its own error reply."""
    url, ledger = serve("auth_server")
    issuer = url.removesuffix("/mcp")
    auth = client_credentials(url, issuer=issuer, client_id="bide-client", client_secret="s3cret")
    async with connect(url, name="payments", auth=auth) as session:
        by_name = {t.spec.name: t for t in await tools(session)}
        await revoke(url, "cc-token-1")
        context = ToolContext(run_id="r", call_id="c1", tool_name="refuse")
        with pytest.raises(ToolError) as raised:
            await by_name["refuse"].call({}, context)
        value = await by_name["pay"].call({"amount": 5}, context)
    assert not isinstance(raised.value, AuthorizationError | ToolOutcomeUnknown)
    assert "declined by the server" in str(raised.value)
    assert value[0]["text"] == "paid 5"
    assert count(ledger, "token") == 2 and lines(ledger).count("mcp 401") == 2
    assert lines(ledger).count("call refuse") == 1 and count(ledger, "call") == 2


async def test_a_refusal_of_a_later_input_round_is_an_unknown_outcome(serve: Serve) -> None:
    """Round 1 reached the tool: a 401 to round 2 cannot say nothing acted."""
    url, ledger = serve("round_server", REFUSE_LATER_ROUNDS="1")

    async def confirm(request: Any) -> Any:
        return ElicitationAnswer(action="accept", content={"ok": True})

    async with connect(url, name="bank", elicitation=confirm) as session:
        (transfer,) = await tools(session, safety={"transfer": Safety.SIDE_EFFECT})
        context = ToolContext(run_id="r", call_id="c1", tool_name="transfer")
        with pytest.raises(ToolOutcomeUnknown, match="refused a later input round") as raised:
            await transfer.call({"amount": 5}, context)
    assert "HTTP 401" in str(raised.value) and "earlier rounds may have acted" in str(raised.value)
    assert lines(ledger) == ["round 1", "refused 401"]
