"""Declarative agents: an ``agent.toml`` names the model, prompt, limits, Python tools and MCP
servers; ``open_agent_file`` builds the Agent, with its MCP sessions open, for a run.

Secrets never appear in the file or the journal: the file names the environment variable that
holds an API key, and the provider reads it when the agent is built.
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from runtime.agent import Agent
from runtime.approval import ApprovalPolicy
from runtime.errors import ConfigError
from runtime.model import Model
from runtime.retry import RetryPolicy
from runtime.tools import Safety, Tool

__all__ = ["AgentFile", "load_agent_file", "open_agent_file"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OpenAIModelSpec(_Strict):
    provider: Literal["openai"]
    name: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    total_timeout: float = 600.0
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = True


class AnthropicModelSpec(_Strict):
    provider: Literal["anthropic"]
    name: str
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout: float = 60.0
    total_timeout: float = 600.0
    max_tokens: int = 4096


class ScriptedModelSpec(_Strict):
    provider: Literal["scripted"]
    script: str
    """A JSON file of turns (see ``runtime.testing.ScriptedModel``), relative to the agent file."""


ModelSpec = Annotated[
    OpenAIModelSpec | AnthropicModelSpec | ScriptedModelSpec, Field(discriminator="provider")
]


class ApprovalSpec(_Strict):
    need: int = 1
    approvers: dict[str, str] = {}
    """Approver id to base64 Ed25519 public key; empty for a single unsigned decision."""


class McpAuthSpec(_Strict):
    """How to authorize with an MCP server reached by URL. Credentials are named, never written:
    by the environment variable that holds them, or by a reference to the host's own code."""

    bearer_token_env: str | None = None
    """The variable holding a bearer token, sent as ``Authorization: Bearer``."""
    headers_env: dict[str, str] = {}
    """A header's name to the variable holding its value (an API key header, say)."""
    client_id_env: str | None = None
    client_secret_env: str | None = None
    issuer: str | None = None
    scope: str | None = None
    """OAuth client credentials: the variables holding the client's id and secret, and the
    authorization server's issuer URL (the secret is sent there only)."""
    token_file: str | None = None
    """Client credentials: the file keeping their tokens across restarts (mode 0600)."""
    provider: str | None = None
    """``module:attr``: a token provider (an async function returning a token), an
    ``httpx2.Auth`` (the SDK's OAuth providers, with the host's token storage), or a function
    of the server's URL returning either."""

    @pydantic.model_validator(mode="after")
    def _one_way(self) -> McpAuthSpec:
        oauth = (self.client_id_env, self.client_secret_env, self.issuer)
        if any(oauth) and not all(oauth):
            raise ValueError("client credentials need client_id_env, client_secret_env and issuer")
        ways = [self.bearer_token_env is not None, all(oauth), self.provider is not None]
        if sum(ways) > 1:
            raise ValueError("give one of bearer_token_env, client credentials or provider")
        if self.token_file is not None and not all(oauth):
            raise ValueError("token_file keeps client-credentials tokens: give client_id_env too")
        return self


class McpServerSpec(_Strict):
    name: str
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    trust_annotations: bool = False
    call_timeout: float | None = None
    safety: dict[str, Safety] = {}
    approval: dict[str, ApprovalSpec] = {}
    reconcile: dict[str, str] = {}
    """A side effect's name to the name of the server's lookup tool that settles its halts."""
    settle: dict[str, float] = {}
    """A reconciled side effect's name to the seconds its server may take to apply a request:
    only after that may the lookup's *absent* settle a halt (``tools(settle=...)``)."""
    max_description_bytes: int | None = None
    max_result_bytes: int | None = None
    durable_elicitation: bool = False
    idempotency_argument: dict[str, str] = {}
    """A tool's name to the argument in which its server takes an idempotency key: bide writes
    its own key for the call there (``tools(idempotency_argument=...)``)."""
    auth: McpAuthSpec | None = None
    principal: str | None = None
    """Who the calls are made as, journaled (``connect(principal=...)``)."""
    protocol_version: str | None = None

    @pydantic.model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url, not both or neither")
        if self.auth is not None and self.url is None:
            raise ValueError("auth applies to a server reached by url")
        return self


class RetrySpec(_Strict):
    max_attempts: int = 3
    initial_delay: float = 0.2
    max_delay: float = 20.0


class AgentFile(_Strict):
    """The validated content of an agent file."""

    name: str | None = None
    system_prompt: str | None = None
    max_turns: int = 20
    max_concurrency: int = 8
    model: ModelSpec
    tools: list[str] = []
    """Python tools as ``module:attr`` (a Tool, or a list of Tools)."""
    mcp: list[McpServerSpec] = []
    tool_retry: RetrySpec | None = None
    model_retry: RetrySpec | None = None


def load_agent_file(path: str | os.PathLike[str]) -> AgentFile:
    """Read and validate an agent file. Errors name the file and the key."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read agent file {where}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    try:
        return AgentFile.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{where}: {key}: {first['msg']}{more}") from None


@asynccontextmanager
async def open_agent_file(path: str | os.PathLike[str]) -> AsyncIterator[Agent[Any]]:
    """Build the agent an agent file describes, with its MCP servers connected while in use."""
    spec = load_agent_file(path)
    base = Path(path).resolve().parent
    where = os.fspath(path)
    async with AsyncExitStack() as stack:
        tools: list[Tool] = []
        for ref in spec.tools:
            tools.extend(_python_tools(where, ref, base))
        for server in spec.mcp:
            tools.extend(await _mcp_tools(stack, where, server, base))
        model = _model(where, spec, base)
        closer = getattr(model, "aclose", None)
        if closer is not None:
            stack.push_async_callback(closer)
        yield Agent(
            model=model,
            tools=tools,
            system_prompt=spec.system_prompt,
            max_turns=spec.max_turns,
            max_concurrency=spec.max_concurrency,
            name=spec.name or Path(where).stem,
            tool_retry=_retry(spec.tool_retry),
            model_retry=_retry(spec.model_retry),
        )


def _retry(spec: RetrySpec | None) -> RetryPolicy | None:
    if spec is None:
        return None
    return RetryPolicy(
        max_attempts=spec.max_attempts, initial_delay=spec.initial_delay, max_delay=spec.max_delay
    )


def _model(where: str, spec: AgentFile, base: Path) -> Model:
    m = spec.model
    try:
        if isinstance(m, ScriptedModelSpec):
            from runtime.testing import ScriptedModel

            return ScriptedModel.from_file(base / m.script)
        if isinstance(m, OpenAIModelSpec):
            from adapters.models.openai import OpenAIChatModel

            return OpenAIChatModel(
                m.name,
                base_url=m.base_url,
                api_key_env=m.api_key_env,
                timeout=m.timeout,
                total_timeout=m.total_timeout,
                max_tokens=m.max_tokens,
                temperature=m.temperature,
                stream=m.stream,
            )
        from adapters.models.anthropic import AnthropicModel

        return AnthropicModel(
            m.name,
            base_url=m.base_url,
            api_key_env=m.api_key_env,
            timeout=m.timeout,
            total_timeout=m.total_timeout,
            max_tokens=m.max_tokens,
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: model: {exc}") from exc


def _python_tools(where: str, ref: str, base: Path) -> list[Tool]:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{where}: tools: {ref!r} is not module:attr")
    for directory in (str(base), os.getcwd()):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: tools: cannot import {ref!r}: {exc}") from exc
    found = list(value) if isinstance(value, list | tuple) else [value]
    for item in found:
        if not isinstance(item, Tool):
            raise ConfigError(f"{where}: tools: {ref!r} is not a Tool (or a list of Tools)")
    return found


async def _mcp_tools(
    stack: AsyncExitStack, where: str, server: McpServerSpec, base: Path
) -> list[Tool]:
    from mcp import StdioServerParameters

    from adapters import mcp as bide_mcp

    target: Any
    credentials: dict[str, Any] = {}
    if server.url is not None:
        target = server.url
        if server.auth is not None:
            credentials = _credentials(
                f"{where}: mcp[{server.name}]", server.auth, server.url, base
            )
    else:
        assert server.command is not None
        cwd = str((base / server.cwd).resolve()) if server.cwd else str(base)
        # "python" means the interpreter running bide, so the server sees the same packages.
        command = sys.executable if server.command in ("python", "python3") else server.command
        target = StdioServerParameters(
            command=command,
            args=list(server.args),
            # Added to the SDK's small default environment (PATH, HOME...), never all of ours:
            # a server does not get the host's secrets unless the file names them.
            env=dict(server.env) or None,
            cwd=cwd,
        )
    key = f"{where}: mcp[{server.name}]"
    try:
        session = await stack.enter_async_context(
            bide_mcp.connect(
                target,
                elicitation=bide_mcp.decline_elicitation,
                name=server.name,
                principal=server.principal,
                protocol_version=server.protocol_version,
                **credentials,
            )
        )
        return await bide_mcp.tools(
            session,
            trust_annotations=server.trust_annotations,
            safety=server.safety,
            approval={name: _policy(key, name, a) for name, a in server.approval.items()},
            # Left out of the file, the adapter's default bound; 0 says "none" explicitly.
            call_timeout=(
                bide_mcp.DEFAULT_CALL_TIMEOUT
                if server.call_timeout is None
                else server.call_timeout
            ),
            durable_elicitation=server.durable_elicitation,
            reconcile=dict(server.reconcile),
            settle=dict(server.settle),
            idempotency_argument=dict(server.idempotency_argument),
            max_description_bytes=_limit(server.max_description_bytes, "description"),
            max_result_bytes=_limit(server.max_result_bytes, "result"),
        )
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from exc
    except OSError as exc:  # the server's command could not be started (no such file, ...)
        raise ConfigError(
            f"{key}: cannot start command {server.command!r}: {exc.strerror or exc}"
        ) from exc


def _credentials(key: str, spec: McpAuthSpec, url: str, base: Path) -> dict[str, Any]:
    """``connect``'s ``headers`` and ``auth`` for an ``auth`` table, read from the environment."""
    from adapters import mcp as bide_mcp

    def env(name: str) -> str:
        value = os.environ.get(name)
        if not value:
            raise ConfigError(f"{key}: auth: the environment variable {name} is not set")
        return value

    headers = {header: env(name) for header, name in spec.headers_env.items()}
    auth: Any = None
    if spec.bearer_token_env is not None:
        headers["Authorization"] = f"Bearer {env(spec.bearer_token_env)}"
    elif spec.client_id_env is not None and spec.client_secret_env and spec.issuer:
        from adapters.mcp.tokens import FileTokenStorage

        stored = FileTokenStorage(base / spec.token_file) if spec.token_file else None
        auth = bide_mcp.client_credentials(
            url,
            issuer=spec.issuer,
            client_id=env(spec.client_id_env),
            client_secret=env(spec.client_secret_env),
            scope=spec.scope,
            storage=stored,
        )
    elif spec.provider is not None:
        found = _imported(key, spec.provider, base)
        auth = found(url) if callable(found) and _is_factory(found) else found
    return {"headers": headers or None, "auth": auth}


def _is_factory(value: Any) -> bool:
    """A plain function of the URL (a factory), not an async token provider."""
    import inspect

    import httpx2

    return not isinstance(value, httpx2.Auth) and not inspect.iscoroutinefunction(value)


def _imported(key: str, ref: str, base: Path) -> Any:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{key}: auth.provider: {ref!r} is not module:attr")
    for directory in (str(base), os.getcwd()):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{key}: auth.provider: cannot import {ref!r}: {exc}") from exc
    return value


def _limit(given: int | None, which: str) -> int:
    """The file's byte limit, or the adapter's default when the file leaves it out."""
    from adapters import mcp as bide_mcp

    if given is not None:
        return given
    if which == "description":
        return bide_mcp.DEFAULT_MAX_DESCRIPTION_BYTES
    return bide_mcp.DEFAULT_MAX_RESULT_BYTES


def _policy(key: str, tool: str, spec: ApprovalSpec) -> ApprovalPolicy:
    try:
        return ApprovalPolicy(need=spec.need, approvers=dict(spec.approvers))
    except ConfigError as exc:
        raise ConfigError(f"{key}: approval.{tool}: {exc}") from exc
