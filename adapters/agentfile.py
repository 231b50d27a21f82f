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

    @pydantic.model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url, not both or neither")
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
    if server.url is not None:
        target = server.url
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
            bide_mcp.connect(target, elicitation=bide_mcp.decline_elicitation, name=server.name)
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
            max_description_bytes=_limit(server.max_description_bytes, "description"),
            max_result_bytes=_limit(server.max_result_bytes, "result"),
        )
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from exc
    except OSError as exc:  # the server's command could not be started (no such file, ...)
        raise ConfigError(
            f"{key}: cannot start command {server.command!r}: {exc.strerror or exc}"
        ) from exc


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
