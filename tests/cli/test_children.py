"""A child run's halt, settled from the CLI and from the console: its parent waits on it, then
completes; ``show`` and the console draw the tree."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from runtime.console import Console
from tests.cli.invoke import Cli

HALTING = "tests.runtime.children_agents:halting_parent"
TOKEN = "children-test-token-0123456789"


def _waiting_tree(cli: Cli, db: str, run_id: str) -> None:
    started = cli("--db", db, "run", "--run-id", run_id, "--agent", HALTING, "bill ann")
    assert started.code == 3, started.err  # the parent waits on its halted child
    shown = cli("--db", db, "show", run_id)
    assert "children:" in shown.out and f"{run_id}/c1  halted  (call c1)" in shown.out
    assert f"{run_id}/c1 is halted" in shown.out  # the reason, at the parent's level
    child = cli("--db", db, "show", f"{run_id}/c1")
    assert f"child of {run_id} (its call c1), which is waiting" in child.out
    assert "halted" in child.out.splitlines()[0]


def test_a_child_s_halt_resolved_from_the_cli_lets_its_parent_complete(
    cli: Cli, tmp_path: Path
) -> None:
    db = str(tmp_path / "bide.db")
    _waiting_tree(cli, db, "p-1")
    said = cli("--db", db, "resolve", "p-1/c1", "k1", "--succeeded", '{"charged": 5}')
    assert said.code == 0, said.err
    done = cli("--db", db, "resume", "p-1")
    assert done.code == 0, done.err
    tree = cli("--db", db, "show", "p-1", "--json").json()
    assert tree["status"] == "completed"
    assert tree["children"] == [{"run_id": "p-1/c1", "call_id": "c1", "status": "completed"}]


def test_a_child_s_halt_resolved_from_the_console_lets_its_parent_complete(
    cli: Cli, tmp_path: Path
) -> None:
    db = str(tmp_path / "bide.db")
    _waiting_tree(cli, db, "p-2")
    with TestClient(Console(db, token=TOKEN, operator="alice")) as c:
        assert c.get("/?token=" + TOKEN).status_code == 200
        parent = c.get("/run?id=p-2").text
        assert "id=children" in parent and "run?id=p-2%2Fc1" in parent
        page = c.get("/run?id=p-2%2Fc1").text
        assert "id=parent" in page and "run?id=p-2" in page
        csrf = page.split("name=csrf value='")[1].split("'")[0]
        form = {
            "csrf": csrf,
            "action": "resolve",
            "call_id": "k1",
            "outcome": "succeeded",
            "value": json.dumps({"charged": 5}),
        }
        files = {k: (None, v) for k, v in form.items()}
        acted = c.post("/act?id=p-2%2Fc1", files=files, follow_redirects=False)
        assert acted.status_code == 303, acted.text
    done = cli("--db", db, "resume", "p-2")
    assert done.code == 0, done.err
    child = cli("--db", db, "show", "p-2/c1", "--json").json()
    assert child["status"] == "completed"
    assert child["parent"] == {"run_id": "p-2", "call_id": "c1", "status": "completed"}


def test_list_roots_hides_child_runs(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "bide.db")
    _waiting_tree(cli, db, "p-3")
    every = {r["run_id"]: r for r in cli("--db", db, "list", "--json").json()["runs"]}
    assert every["p-3/c1"]["parent"] == "p-3" and every["p-3"]["parent"] is None
    roots = cli("--db", db, "list", "--roots", "--json").json()["runs"]
    assert [r["run_id"] for r in roots] == ["p-3"]
    halted_roots = cli("--db", db, "list", "--roots", "--status", "halted", "--json").json()
    assert halted_roots["runs"] == []  # the halted run is the child
