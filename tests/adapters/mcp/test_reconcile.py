"""An MCP side effect paired with a lookup tool of the same server settles its own halts."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from adapters.mcp.reconcile import read_lookup
from runtime import Journal
from runtime.reconcile import Absent, Found, Unknown
from runtime.tools import idempotency_key_for
from tests.cli.invoke import child


def test_a_charge_killed_after_the_server_took_it_is_settled_by_the_servers_lookup(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "bide.db", tmp_path / "ledger"
    spec = "tests.adapters.mcp.ledger_agent:paired"
    killed = child(
        "run", "--db", str(db), "--agent", spec, "--run-id", "r", "go",
        LEDGER=str(ledger), BIDE_CRASH="tool.after_call",
    )  # fmt: skip
    assert killed.code == -signal.SIGKILL, killed.err
    key = idempotency_key_for("r", "c1")
    assert [json.loads(line)["key"] for line in ledger.read_text().splitlines()] == [key]
    resumed = child("resume", "--db", str(db), "r", LEDGER=str(ledger))
    assert (resumed.code, resumed.out) == (0, "charged\n"), resumed.err
    assert len(ledger.read_text().splitlines()) == 1  # never charged again

    async def resolution() -> dict[str, object]:
        async with Journal(db) as journal:
            state = await journal.require("r")
        return dict(state.calls["c1"].results[1].payload)

    result = asyncio.run(resolution())
    assert result["outcome"] == "value" and result["value"] == {"charged": 5}
    resolved = result["resolved"]
    assert isinstance(resolved, dict)
    assert resolved["reconciler"] == "find_charge" and resolved["by"] == "reconciler find_charge"
    assert resolved["evidence"] == f"find_charge for key {key}: ledger line with amount 5"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            {"found": True, "value": {"id": 1}, "evidence": "row 1"},
            Found({"id": 1}, "l for key k: row 1"),
        ),
        ([{"type": "text", "text": '{"found": false}'}], Absent('l for key k: {"found": false}')),
        ({"found": True}, Found({"found": True}, 'l for key k: {"found": true}')),
        ({"found": "yes"}, None),
        ([{"type": "text", "text": "not json"}], None),
        ([], None),
    ],
)
def test_the_lookup_convention(answer: object, said: Found | Absent | None) -> None:
    got = read_lookup(answer, lookup="l", key="k")
    if said is None:
        assert isinstance(got, Unknown) and "without a found: true|false object" in got.why
    else:
        assert got == said


def test_the_pairing_example_in_docs_finds_the_refund_by_its_key() -> None:
    import re
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    docs = (ROOT / "docs" / "mcp.md").read_text()
    section = docs.split("## Reconciling a side effect with a lookup tool", 1)[1]
    (example,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    done = subprocess.run(
        [sys.executable, "-c", example],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    key = idempotency_key_for("run-1", "c1")
    assert done.stdout == f"find_refund for key {key}: a refund of 500 cents has this key\n"


def ledger_agent_file(where: Path, server: str) -> Path:
    """An agent file whose one MCP server is the ledger server, its table ending in ``server``
    (the lines under test)."""
    from tests.conftest import ROOT

    (where / "s.json").write_text("[]")
    path = where / "agent.toml"
    path.write_text(
        f"""
[model]
provider = "scripted"
script = "s.json"

[[mcp]]
name = "ledger"
command = "python"
args = ["-m", "tests.adapters.mcp.ledger_server"]
env = {{ PYTHONPATH = {json.dumps(str(ROOT))}, LEDGER = {json.dumps(str(where / "l"))} }}
safety = {{ find_charge = "read_only" }}
{server}
"""
    )
    return path


async def test_an_agent_file_pairs_a_side_effect_with_its_lookup(tmp_path: Path) -> None:
    from adapters.agentfile import open_agent_file
    from runtime import ConfigError

    def agent_file(reconcile: str) -> Path:
        return ledger_agent_file(tmp_path, f"reconcile = {{ {reconcile} }}")

    async with open_agent_file(agent_file('charge = "find_charge"')) as agent:
        reconciler = agent.tools["charge"].spec.reconcile
        assert reconciler is not None and reconciler.__name__ == "find_charge"
        assert agent.tools["find_charge"].spec.reconcile is None
    with pytest.raises(ConfigError, match=r"mcp\[ledger\].*fnd_charge"):
        async with open_agent_file(agent_file('charge = "fnd_charge"')):
            pass


async def test_a_side_effect_settles_an_absent_only_after_the_settle_time_it_is_given(
    tmp_path: Path,
) -> None:
    """An MCP side effect inherits no settle time (not its call timeout): without one, the
    lookup's absent leaves the halt for a person; ``settle`` declares it, for a reconciled tool
    only."""
    from adapters.agentfile import open_agent_file
    from runtime import ConfigError

    def agent_file(settle: str) -> Path:
        return ledger_agent_file(
            tmp_path,
            f'call_timeout = 2\nreconcile = {{ charge = "find_charge" }}\nsettle = {{ {settle} }}',
        )

    async with open_agent_file(agent_file("")) as agent:
        assert agent.tools["charge"].spec.timeout == 2
        assert agent.tools["charge"].spec.settle is None
    async with open_agent_file(agent_file("charge = 30")) as agent:
        assert agent.tools["charge"].spec.settle == 30.0
    with pytest.raises(ConfigError, match="settle names find_charge, which has no reconciler"):
        async with open_agent_file(agent_file("find_charge = 30")):
            pass
    with pytest.raises(ConfigError, match=r"settle\[.charge.\] must be a number of seconds"):
        async with open_agent_file(agent_file("charge = -1")):
            pass


def test_a_lookup_answer_nested_thousands_deep_is_unknown_not_a_crash() -> None:
    deep = "[" * 5000 + "]" * 5000
    got = read_lookup([{"type": "text", "text": deep}], lookup="l", key="k")
    assert isinstance(got, Unknown)
