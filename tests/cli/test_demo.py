"""``demo``: a crash after a charge ends, through a halt and its reconciler, in one charge."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.payments import PaymentsLedger
from tests.cli.invoke import Cli, child


def test_python_m_runtime_demo_exits_0_with_exactly_one_charge_in_the_ledger(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    real = tmp_path / "real.db"
    done = child("demo", "--db", str(db), BIDE_DB=str(real))
    assert done.code == 0, done.out + done.err
    charges = PaymentsLedger(str(tmp_path / "demo-payments-ledger.db")).charges()
    assert [(c["customer"], c["amount_cents"]) for c in charges] == [("ann", 1200)]
    assert "The ledger: 1 charge." in done.out
    assert "call c3 settled by reconciler find_charge: it said found" in done.out
    assert 'by reconciler find_charge; evidence: "ledger charge ch_1 carries the call' in done.out
    assert not real.exists()  # $BIDE_DB names real runs: the demo never touches them
    runs = child("list", "--db", str(db), "--json").json()["runs"]
    assert [r["status"] for r in runs] == ["completed"]


def test_demo_in_process_uses_a_temporary_journal_and_removes_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = cli("demo")
    assert done.code == 0, done.err
    journal = Path(done.out.splitlines()[2].split()[1])
    assert journal.name == "bide.db" and not journal.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_demo_refuses_a_journal_that_exists(cli: Cli, db_path: Path) -> None:
    cli("migrate", "--db", str(db_path))
    done = cli("demo", "--db", str(db_path))
    assert done.code == 2
    assert done.error_line == f"bide: error: demo: {db_path} exists; the demo starts afresh"
    assert cli("list", "--db", str(db_path), "--json").json()["runs"] == []


def test_demo_help_documents_only_the_options_the_demo_honours(cli: Cli) -> None:
    done = cli("demo", "--help")
    assert done.code == 0
    assert "$BIDE_DB, ./bide.db" not in done.out
    assert "--log-format" not in done.out and "--quiet" not in done.out
    assert "--db PATH" in done.out and "Never $BIDE_DB" in done.out
