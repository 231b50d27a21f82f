"""Agent files: validation that names the file and key, and agents built from them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.agentfile import load_agent_file, open_agent_file
from runtime import ConfigError, Journal, RunStatus, Safety
from tests.adapters.mcp.processes import serve as serve  # a fixture
from tests.conftest import ROOT

TOOLS_MODULE = '''
from runtime import Safety, tool

@tool(safety=Safety.READ_ONLY)
async def lookup(customer: str) -> dict:
    """Look a customer up."""
    return {"customer": customer, "plan": "pro"}
'''


def write_agent(tmp_path: Path, toml: str, script: list[dict[str, Any]] | None = None) -> Path:
    (tmp_path / "agent_tools.py").write_text(TOOLS_MODULE)
    if script is not None:
        (tmp_path / "script.json").write_text(json.dumps(script))
    path = tmp_path / "agent.toml"
    path.write_text(toml)
    return path


SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"customer": "ann"}}]},
    {"tool_calls": [{"id": "c2", "name": "echo", "arguments": {"text": "hello"}}]},
    {"text": "done"},
]


def stdio_server_toml() -> str:
    server = ROOT / "tests" / "adapters" / "mcp" / "stdio_server.py"
    return f"""
[[mcp]]
name = "test"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]
trust_annotations = true
call_timeout = 30
env = {{ PYTHONPATH = {json.dumps(str(ROOT))} }}
"""


async def test_an_agent_file_with_a_scripted_model_python_tools_and_an_mcp_server_runs(
    tmp_path: Path, db_path: Path
) -> None:
    path = write_agent(
        tmp_path,
        f"""
name = "support"
system_prompt = "Be brief."
max_turns = 5
tools = ["agent_tools:lookup"]

[model]
provider = "scripted"
script = "script.json"
{stdio_server_toml()}
""",
        SCRIPT,
    )
    async with open_agent_file(path) as agent:
        assert agent.name == "support" and agent.max_turns == 5
        assert {n: t.spec.safety for n, t in agent.tools.items()} == {
            "lookup": Safety.READ_ONLY,
            "echo": Safety.READ_ONLY,
            "die": Safety.SIDE_EFFECT,
        }
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal, spec=str(path))
            state = await journal.require("r")
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    content, _ = state.calls["c2"].message_content()
    assert content == [{"type": "text", "text": "hello"}]
    assert state.start is not None and state.start["spec"] == str(path)


async def test_an_openai_model_file_journals_the_key_variable_name_never_the_key(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-very-secret")
    path = write_agent(
        tmp_path,
        """
[model]
provider = "openai"
name = "local-model"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "MY_LLM_KEY"
""",
    )
    spec = load_agent_file(path)
    assert spec.model.provider == "openai"
    async with open_agent_file(path) as agent:
        assert agent.tools == {}
    assert "sk-very-secret" not in path.read_text()


@pytest.mark.parametrize(
    ("provider", "line", "bound"),
    [("openai", "", 600.0), ("anthropic", "total_timeout = 90\n", 90.0)],
)
async def test_a_model_file_bounds_each_turn_by_default_and_may_set_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, line: str, bound: float
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-test")
    toml = f'[model]\nprovider = "{provider}"\nname = "m"\napi_key_env = "MY_LLM_KEY"\n{line}'
    async with open_agent_file(write_agent(tmp_path, toml)) as agent:
        assert getattr(agent.model, "total_timeout", None) == bound


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("max_turns = 3", "model: Field required"),
        ('[model]\nprovider = "gpt"', "model: Input tag 'gpt'"),
        ('[model]\nprovider = "scripted"\nscript = "s.json"\ncolour = 1', "model.scripted.colour"),
        ('max_turns = "many"\n[model]\nprovider = "scripted"\nscript = "s.json"', "max_turns"),
        ('[model]\nprovider = "scripted"\nscript = "s.json"\n[[mcp]]\nname = "x"', "mcp.0"),
        ("this is = = not toml", "not valid TOML"),
    ],
)
def test_validation_errors_name_the_file_and_the_key(
    tmp_path: Path, toml: str, message: str
) -> None:
    path = write_agent(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        load_agent_file(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


async def test_a_tool_reference_that_does_not_import_is_a_config_error(tmp_path: Path) -> None:
    path = write_agent(
        tmp_path,
        'tools = ["agent_tools:nothing"]\n[model]\nprovider = "scripted"\nscript = "script.json"',
        SCRIPT,
    )
    with pytest.raises(ConfigError, match="agent_tools:nothing"):
        async with open_agent_file(path):
            pass


async def test_a_misspelt_mcp_safety_entry_names_the_server(tmp_path: Path) -> None:
    toml = (
        '[model]\nprovider = "scripted"\nscript = "script.json"\n'
        + stdio_server_toml()
        + 'safety = { ecko = "read_only" }\n'
    )
    path = write_agent(tmp_path, toml, SCRIPT)
    with pytest.raises(ConfigError, match=r"mcp\[test\].*ecko"):
        async with open_agent_file(path):
            pass


def test_a_missing_agent_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read agent file"):
        load_agent_file(tmp_path / "nope.toml")


async def test_mcp_tools_of_an_agent_file_get_the_default_call_timeout_unless_it_sets_one(
    tmp_path: Path,
) -> None:
    from adapters.mcp import DEFAULT_CALL_TIMEOUT

    unset = stdio_server_toml().replace("call_timeout = 30\n", "")
    for toml, expected in ((unset, DEFAULT_CALL_TIMEOUT), (stdio_server_toml(), 30)):
        path = write_agent(tmp_path, f'[model]\nprovider = "scripted"\nscript = "s.json"\n{toml}')
        (tmp_path / "s.json").write_text("[]")
        async with open_agent_file(path) as agent:
            assert agent.tools["echo"].spec.timeout == expected


async def test_an_agent_file_names_the_argument_that_takes_bides_idempotency_key(
    tmp_path: Path,
) -> None:
    from runtime.tools import ToolContext, idempotency_key_for

    toml = (
        '[model]\nprovider = "scripted"\nscript = "s.json"\n'
        + stdio_server_toml()
        + 'idempotency_argument = { echo = "text" }\n'
    )
    path = write_agent(tmp_path, toml)
    (tmp_path / "s.json").write_text("[]")
    async with open_agent_file(path) as agent:
        echo = agent.tools["echo"]
        assert "text" not in echo.spec.input_schema.get("required", [])
        context = ToolContext(run_id="r", call_id="c1", tool_name="echo")
        value = await echo.call({"text": "the model's own"}, context)
    assert value[0]["text"] == idempotency_key_for("r", "c1")


def auth_server_toml(url: str, auth: str) -> str:
    return f"""
[model]
provider = "scripted"
script = "s.json"

[[mcp]]
name = "payments"
url = {json.dumps(url)}
auth = {auth}
"""


async def test_an_agent_file_names_the_servers_credentials_by_environment_variable(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.tools import ToolContext

    url, ledger = serve("auth_server")
    issuer = url.removesuffix("/mcp")
    (tmp_path / "s.json").write_text("[]")
    monkeypatch.setenv("PAY_TOKEN", "good-token")
    monkeypatch.setenv("PAY_CLIENT", "bide-client")
    monkeypatch.setenv("PAY_SECRET", "s3cret")
    for auth in (
        '{ bearer_token_env = "PAY_TOKEN" }',
        '{ client_id_env = "PAY_CLIENT", client_secret_env = "PAY_SECRET", '
        f'issuer = "{issuer}" }}',
    ):
        path = write_agent(tmp_path, auth_server_toml(url, auth))
        async with open_agent_file(path) as agent:
            value = await agent.tools["pay"].call(
                {"amount": 1}, ToolContext(run_id="r", call_id="c1", tool_name="pay")
            )
        assert value[0]["text"] == "paid 1"
    assert "token client_credentials" in ledger.read_text()
    assert "good-token" not in path.read_text()  # the file names the variable, never the value


async def test_an_agent_file_keeps_client_credentials_tokens_in_its_token_file(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    from runtime import Journal

    url, ledger = serve("auth_server")
    (tmp_path / "s.json").write_text(
        json.dumps(
            [
                {"tool_calls": [{"id": "c1", "name": "pay", "arguments": {"amount": 1}}]},
                {"text": "done"},
            ]
        )
    )
    monkeypatch.setenv("PAY_CLIENT", "bide-client")
    monkeypatch.setenv("PAY_SECRET", "s3cret")
    auth = (
        '{ client_id_env = "PAY_CLIENT", client_secret_env = "PAY_SECRET", '
        f'issuer = "{url.removesuffix("/mcp")}", token_file = "state/tokens.json" }}'
    )
    toml = auth_server_toml(url, auth) + 'safety = { pay = "side_effect" }\n'
    path = write_agent(tmp_path, toml)
    for run in ("r1", "r2"):  # two hosts, one after the other
        async with open_agent_file(path) as agent, Journal(tmp_path / "bide.db") as journal:
            await agent.run(run, "pay", journal=journal)
            state = await journal.require(run)
        (step,) = state.calls["c1"].handles[1].values()
        assert step.payload["handle"]["mcp_call"] == {
            "server": "payments",
            "principal": "bide-client",
        }
    stored = tmp_path / "state" / "tokens.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and "cc-token-1" in stored.read_text()
    assert ledger.read_text().count("token client_credentials") == 1  # the second host reused it
    assert ledger.read_text().count("call pay") == 2


async def test_an_unset_credential_variable_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    (tmp_path / "s.json").write_text("[]")
    toml = auth_server_toml("http://127.0.0.1:9/mcp", '{ bearer_token_env = "NO_SUCH_TOKEN" }')
    with pytest.raises(ConfigError, match=r"mcp\[payments\]: auth: .*NO_SUCH_TOKEN is not set"):
        async with open_agent_file(write_agent(tmp_path, toml)):
            pass


def test_auth_for_a_stdio_server_or_two_ways_at_once_is_refused(tmp_path: Path) -> None:
    both = auth_server_toml(
        "http://127.0.0.1:9/mcp", '{ bearer_token_env = "A", provider = "m:p" }'
    )
    with pytest.raises(ConfigError, match="give one of"):
        load_agent_file(write_agent(tmp_path, both))
    stdio = (
        '[model]\nprovider = "scripted"\nscript = "s.json"\n'
        + stdio_server_toml()
        + 'auth = { bearer_token_env = "A" }\n'
    )
    with pytest.raises(ConfigError, match="auth applies to a server reached by url"):
        load_agent_file(write_agent(tmp_path, stdio))
