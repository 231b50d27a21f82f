"""Against a server nobody here wrote: the reference filesystem server, installed from the npm
registry when the tests start (skipped, with the reason, when it cannot be installed).

Its trusted ``idempotentHint`` (with ``destructiveHint``) makes ``write_file`` IDEMPOTENT, and a
failure it reports is a definite error the model sees, never a halt.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from adapters.mcp import connect, tools
from runtime import Agent, Journal, RunStatus, Safety
from runtime.testing import ScriptedModel

PACKAGE = "@modelcontextprotocol/server-filesystem"


@pytest.fixture(scope="module")
def filesystem_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The server's entry point, installed from the npm registry into a temporary prefix."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip(
            f"{PACKAGE} needs node and npm, and this machine has no {'npm' if node else 'node'}"
        )
    prefix = tmp_path_factory.mktemp("npm")
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", PACKAGE],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {PACKAGE} did not finish within 300 s")
    entry = prefix / "node_modules" / PACKAGE / "dist" / "index.js"
    if done.returncode != 0 or not entry.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        pytest.skip(f"npm install {PACKAGE} failed (exit {done.returncode}): {' | '.join(tail)}")
    yield entry


def _params(entry: Path, root: Path) -> StdioServerParameters:
    return StdioServerParameters(command="node", args=[str(entry), str(root)])


async def test_a_trusted_idempotent_and_destructive_tool_is_idempotent(
    filesystem_server: Path, tmp_path: Path
) -> None:
    async with connect(_params(filesystem_server, tmp_path), name="filesystem") as session:
        safety = {t.spec.name: t.spec.safety for t in await tools(session, trust_annotations=True)}
    assert safety["write_file"] is Safety.IDEMPOTENT  # idempotentHint and destructiveHint
    assert safety["read_text_file"] is Safety.READ_ONLY
    assert safety["move_file"] is Safety.SIDE_EFFECT  # not idempotent: moving twice differs


async def test_a_failure_the_server_reports_is_recorded_and_the_run_goes_on(
    filesystem_server: Path, tmp_path: Path, db_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    script = [
        {
            "tool_calls": [
                {
                    "id": "m1",
                    "name": "move_file",
                    "arguments": {"source": str(root / "absent"), "destination": str(root / "b")},
                },
                {
                    "id": "w1",
                    "name": "write_file",
                    "arguments": {"path": str(root / "note"), "content": "hello"},
                },
            ]
        },
        {"text": "done"},
    ]
    async with connect(_params(filesystem_server, root), name="filesystem") as session:
        listed = await tools(session, trust_annotations=True)
        agent = Agent(model=ScriptedModel(script), tools=listed)
        async with Journal(db_path) as journal:
            result = await agent.run("r", "go", journal=journal)
            state = await journal.require("r")
    assert result.status is RunStatus.COMPLETED  # the side effect's failure did not halt it
    content, is_error = state.calls["m1"].message_content()
    assert is_error and "absent" in content["message"]
    assert state.calls["w1"].message_content()[1] is False
    assert (root / "note").read_text() == "hello"
    assert not (root / "b").exists()
