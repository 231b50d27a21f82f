"""``FileTokenStorage``: OAuth tokens kept in a file of mode 0600, written atomically, read back
by a new storage (a restarted host), refused when others may read it; and, against the real
authorization server, a restarted host that finds its token in the file asks for no new one."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from adapters.mcp import client_credentials, connect, tools
from adapters.mcp.tokens import FileTokenStorage
from runtime.errors import ConfigError
from runtime.tools import ToolContext
from tests.adapters.mcp.processes import Serve, count


async def test_tokens_survive_a_new_storage_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "payments.json"
    first = FileTokenStorage(path)
    assert await first.get_tokens() is None and await first.get_client_info() is None
    await first.set_tokens(OAuthToken(access_token="tok-1", expires_in=60, scope="payments"))
    client = OAuthClientInformationFull(client_id="bide-client", redirect_uris=None)
    await first.set_client_info(client)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = FileTokenStorage(path)  # a restarted host
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.access_token == "tok-1" and tokens.scope == "payments"
    info = await again.get_client_info()
    assert info is not None and info.client_id == "bide-client"
    assert "tok-1" not in repr(again)
    # Written atomically: nothing but the file itself is left in the directory.
    assert sorted(p.name for p in path.parent.iterdir()) == ["payments.json"]


async def test_a_write_replaces_the_file_never_edits_it_in_place(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    storage = FileTokenStorage(path)
    await storage.set_tokens(OAuthToken(access_token="old"))
    before = path.stat().st_ino
    await storage.set_tokens(OAuthToken(access_token="new"))
    assert path.stat().st_ino != before  # a new file renamed over the old one
    tokens = await storage.get_tokens()
    assert tokens is not None and tokens.access_token == "new"


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o604])
async def test_a_file_others_may_read_or_write_is_refused_unread(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "t.json"
    storage = FileTokenStorage(path)
    await storage.set_tokens(OAuthToken(access_token="secret-token"))
    os.chmod(path, mode)
    with pytest.raises(ConfigError, match=f"mode {mode:o}.*chmod 600") as raised:
        await storage.get_tokens()
    assert "secret-token" not in str(raised.value)


@pytest.mark.parametrize("body", ["not json", "[1]", '{"tokens": {"nope": 1}}'])
async def test_a_damaged_file_is_a_config_error_naming_it_never_quoting_it(
    tmp_path: Path, body: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(body)
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="token file") as raised:
        await FileTokenStorage(path).get_tokens()
    assert body not in str(raised.value)


async def test_a_restarted_host_reuses_the_stored_token_and_asks_for_no_new_one(
    serve: Serve, tmp_path: Path
) -> None:
    url, ledger = serve("auth_server")
    path = tmp_path / "payments.json"

    async def pay() -> Any:
        auth = client_credentials(
            url,
            issuer=url.removesuffix("/mcp"),
            client_id="bide-client",
            client_secret="s3cret",
            storage=FileTokenStorage(path),
        )
        async with connect(url, name="payments", auth=auth) as session:
            (tool,) = [t for t in await tools(session) if t.spec.name == "pay"]
            return await tool.call(
                {"amount": 2}, ToolContext(run_id="r", call_id="c1", tool_name="pay")
            )

    assert (await pay())[0]["text"] == "paid 2"
    assert count(ledger, "token") == 1
    assert "cc-token-1" in path.read_text()
    assert (await pay())[0]["text"] == "paid 2"  # a new process's storage, the same file
    assert count(ledger, "token") == 1  # the stored token was used: no new token request
