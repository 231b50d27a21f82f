"""What a user who installed bide's wheel (not an editable checkout) can do: import every
module of the source tree, run the demo and every group of CLI verbs in an empty directory,
and open a journal on PostgreSQL, which the installed bide migrates itself."""

from __future__ import annotations

import json
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.wheel.conftest import Installed

PACKAGES = ("runtime", "adapters")


def source_modules() -> list[str]:
    """Every module under runtime/ and adapters/ in this checkout, by import name (but
    ``__main__``, which runs the CLI when imported: the CLI tests run it)."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


IMPORT_ALL = """
import importlib, json, sys
failed, outside = {}, []
for name in json.loads(sys.argv[1]):
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
        continue
    where = getattr(module, "__file__", None) or ""
    if not where.startswith(sys.prefix):
        outside.append(f"{name}: {where}")
print(json.dumps({"failed": failed, "outside": outside}))
"""


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    here = tmp_path / "empty"
    here.mkdir()
    return here


def test_every_module_of_the_source_tree_imports_from_the_installed_wheel(
    installed: Installed, empty: Path
) -> None:
    modules = source_modules()
    assert "runtime.tracing" in modules and "adapters.mcp.session" in modules
    done = installed.run("python", "-c", IMPORT_ALL, json.dumps(modules), cwd=empty)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"failed": {}, "outside": []}


def test_the_wheel_ships_the_migrations_the_console_files_and_the_license(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for script in (ROOT / "migrations").rglob("*.py"):
        assert f"runtime/_migrations/{script.relative_to(ROOT / 'migrations')}" in names
    assert "runtime/_migrations/script.py.mako" in names
    for static in (ROOT / "runtime" / "console" / "static").iterdir():
        assert f"runtime/console/static/{static.name}" in names
    assert {"runtime/py.typed", "adapters/py.typed"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "bench/", "examples/", "migrations/")) for n in names)


def test_the_version_is_one_and_both_entry_points_say_it(installed: Installed, empty: Path) -> None:
    version = installed.run("python", "-c", "import runtime; print(runtime.__version__)", cwd=empty)
    expected = f"bide {version.stdout.strip()}\n"
    assert installed.wheel.name.startswith(f"bide-{version.stdout.strip()}-")
    for argv in (("python", "-m", "runtime", "--version"), ("bide", "--version")):
        done = installed.run(*argv, cwd=empty)
        assert (done.returncode, done.stdout) == (0, expected), done.stderr


def test_the_demo_runs_in_an_empty_directory_and_leaves_it_empty(
    installed: Installed, empty: Path
) -> None:
    """`pip install bide` (no checkout, no examples/ beside it): the demo charges once."""
    done = installed.run("python", "-m", "runtime", "demo", cwd=empty, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The ledger: 1 charge." in done.stdout
    assert "call c3 settled by reconciler find_charge: it said found" in done.stdout
    assert list(empty.iterdir()) == []


AGENT = '''
from runtime import Agent, Safety, tool
from runtime.testing import ScriptedModel


@tool(safety=Safety.READ_ONLY)
async def balance(customer: str) -> int:
    """A balance."""
    return 1200


def make() -> Agent:
    model = ScriptedModel(
        [
            {"tool_calls": [{"id": "c1", "name": "balance", "arguments": {"customer": "ann"}}]},
            {"text": "ann has 12.00"},
        ]
    )
    return Agent(model=model, tools=[balance], name="shop")


agent = make()
'''


def test_every_group_of_cli_verbs_runs_from_the_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    """One verb of each command module: driving, a worker, viewing, the operator's verbs,
    reconcilers, keys, maintenance, the console's help."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "shop.py").write_text(textwrap.dedent(AGENT), encoding="utf-8")

    def cli(*argv: str) -> tuple[int, str]:
        """Exit code and stdout; stderr (progress lines, errors) is shown when it fails."""
        done = installed.run("python", "-m", "runtime", "-q", "--db", "j.db", *argv, cwd=work)
        return done.returncode, done.stdout or done.stderr

    assert installed.run("python", "-m", "runtime", "--help", cwd=work).returncode == 0
    assert cli("run", "--agent", "shop:agent", "--run-id", "r1", "go") == (0, "ann has 12.00\n")
    code, out = cli("submit", "--agent", "shop:agent", "--run-id", "r2", "go")
    assert code == 0, out
    code, out = cli("worker", "--exit-when-idle", "1", "--poll", "0.2")
    assert code == 0, out
    code, out = cli("list", "--json")
    assert code == 0, out
    assert {r["run_id"]: r["status"] for r in json.loads(out)["runs"]} == {
        "r1": "completed",
        "r2": "completed",
    }
    code, out = cli("show", "r1")
    assert code == 0 and "balance" in out, out
    code, out = cli("cancel", "r1")
    assert code == 2 and "already ended" in out, out
    code, out = cli("reconcile", "--agent", "shop:agent")
    assert code == 0, out
    code, out = cli("verify")
    assert code == 0, out
    code, out = cli("migrate", "--check")
    assert code == 0, out
    code, out = cli("keygen", "--out", str(work / "key"))
    assert code == 0, out
    assert installed.run("python", "-m", "runtime", "console", "--help", cwd=work).returncode == 0


OPEN_POSTGRES = """
import asyncio, sys
from runtime import Journal

async def main() -> None:
    async with Journal(sys.argv[1]) as journal:
        assert await journal.store.create_run("r1")
        print(sorted(r.run_id for r in (await journal.store.list_runs()).runs))

asyncio.run(main())
"""


def test_the_installed_wheel_migrates_and_opens_a_journal_on_postgresql(
    installed: Installed, empty: Path, pg_empty: str
) -> None:
    done = installed.run("python", "-c", OPEN_POSTGRES, pg_empty, cwd=empty)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['r1']\n"
