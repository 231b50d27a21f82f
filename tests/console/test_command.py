"""``python -m runtime console``: where it binds, the token it prints or takes, and its refusals."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.cli.console import loopback
from tests.console.conftest import TOKEN, cli, serve


def get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_loopback_names_only_this_machine() -> None:
    assert all(loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(loopback(h) for h in ("0.0.0.0", "::", "10.0.0.7", "example.com"))


def test_a_non_loopback_address_without_a_token_set_is_refused_before_binding(
    db_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BIDE_CONSOLE_TOKEN", raising=False)
    cli("--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:agent", "go")
    capsys.readouterr()
    assert main(["--db", str(db_path), "console", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "set $BIDE_CONSOLE_TOKEN" in capsys.readouterr().err


def test_a_console_without_a_journal_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(tmp_path / "none.db"), "console"]) == 2
    assert "no journal at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_the_console_prints_the_token_it_made_up_and_every_request_needs_it(
    db_path: Path,
) -> None:
    cli("--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:agent", "go")
    with serve(db_path, "--operator", "dana") as served:
        assert served.process.stdout is not None
        lines = [served.process.stdout.readline() for _ in range(3)]
        found = re.search(r"open: (http://127\.0\.0\.1:\d+/)\?token=(\S+)", "".join(lines))
        assert found is not None, lines
        assert found.group(1) == served.url
        made = found.group(2)
        assert len(made) >= 16 and made != TOKEN
        assert "acting as: dana" in "".join(lines)
        assert get(served.url) == 401
        assert get(served.url, "wrong-token-wrong-token") == 401
        assert get(served.url, made) == 200
        assert get(served.url + "run?id=r", made) == 200


def test_the_console_takes_its_token_from_the_environment_and_does_not_print_it(
    db_path: Path,
) -> None:
    cli("--db", str(db_path), "run", "--run-id", "r", "--agent", "tests.cli.agents:agent", "go")
    with serve(db_path, BIDE_CONSOLE_TOKEN=TOKEN) as served:
        assert served.process.stdout is not None
        printed = "".join(served.process.stdout.readline() for _ in range(3))
        assert TOKEN not in printed and "token=$BIDE_CONSOLE_TOKEN" in printed
        assert get(served.url, TOKEN) == 200
