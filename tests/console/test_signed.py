"""Signed m-of-n decisions made offline (``approve --key --out``) and handed to the console."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from starlette.testclient import TestClient

from runtime.approval import decision_bytes
from runtime.cli.people import DECISION_FORMAT as WRITTEN
from runtime.console import DECISION_FORMAT, Console
from tests.console.conftest import TOKEN, cli, records

ARGUMENTS = {"account": "acme", "amount": 500}


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Key pairs for alice, bob and carol, named as the 2-of-3 gate's approvers."""
    made = {}
    for name in ("alice", "bob", "carol"):
        made[name] = tmp_path / f"{name}.pem"
        assert cli("keygen", "--out", str(made[name])) == 0
    monkeypatch.setenv("BIDE_TEST_APPROVERS", ",".join(f"{n}={p}.pub" for n, p in made.items()))
    return made


def sign(tmp_path: Path, keys: dict[str, Path], who: str, *extra: str) -> Path:
    out = tmp_path / f"{who}-decision.json"
    done = cli(
        "--db", str(tmp_path / "no-journal-here.db"), "approve", "r", "c1",
        "--approver", who, "--key", str(keys[who]),
        "--tool", "wire", "--arguments", json.dumps(ARGUMENTS), "--out", str(out), *extra,
    )  # fmt: skip
    assert done == 0
    return out


def test_approve_out_signs_a_decision_without_any_journal(
    tmp_path: Path, keys: dict[str, Path]
) -> None:
    out = sign(tmp_path, keys, "alice")
    assert not (tmp_path / "no-journal-here.db").exists()
    document = json.loads(out.read_text())
    assert document["format"] == DECISION_FORMAT == WRITTEN
    assert (document["run_id"], document["call_id"], document["tool"]) == ("r", "c1", "wire")
    decision = document["decision"]
    assert decision["approver"] == "alice" and decision["approve"] is True
    key = load_pem_private_key(keys["alice"].read_bytes(), password=None)
    message = decision_bytes(
        run_id="r", call_id="c1", tool="wire", arguments=ARGUMENTS, approver="alice", approve=True
    )
    key.public_key().verify(base64.b64decode(decision["signature"]), message)
    again = ("approve", "r", "c1", "--approver", "alice", "--key", str(keys["alice"]),
             "--tool", "wire", "--arguments", "{}", "--out", str(out))  # fmt: skip
    assert cli(*again) == 2  # never overwrites a file


def test_the_console_counts_uploaded_and_pasted_signed_decisions_and_the_gate_opens(
    tmp_path: Path, db_path: Path, keys: dict[str, Path]
) -> None:
    assert cli("--db", str(db_path), "run", "--run-id", "r", "--agent",
               "tests.cli.agents:signed_gate", "go") == 3  # fmt: skip
    forged = sign(tmp_path, keys, "carol")
    forged_doc = json.loads(forged.read_text())
    forged_doc["decision"]["approver"] = "bob"  # carol's signature, bob's name
    alice, bob = sign(tmp_path, keys, "alice"), sign(tmp_path, keys, "bob")
    with TestClient(Console(db_path, token=TOKEN, operator="ops")) as c:
        c.get("/?token=" + TOKEN)
        page = c.get("/run?id=r").text
        token = re.search(r"name=csrf value='([0-9a-f]+)'", page)
        assert token is not None and "--approver ID --key KEY.pem --tool wire" in page

        def submit(where: str, **files: tuple[str | None, str]) -> str:
            form = {"csrf": (None, token.group(1)), "action": (None, "signed"),
                    "call_id": (None, "c1"), **files}  # fmt: skip
            return html.unescape(c.post(f"/{where}?id=r", files=form).text)

        unsigned = c.post(
            "/act?id=r",
            files={
                "csrf": (None, token.group(1)),
                "action": (None, "approve"),
                "call_id": (None, "c1"),
            },
        )
        assert unsigned.status_code == 409 and "needs signed decisions" in unsigned.text

        shown = submit("confirm", decision=(None, json.dumps(forged_doc)))
        assert "does not verify" in shown  # the confirmation warns before anything is journaled
        assert "not counted" in submit("act", decision=(None, json.dumps(forged_doc)))

        shown = submit("confirm", decision=(None, ""), decision_file=("a.json", alice.read_text()))
        assert "does not verify" not in shown and "as alice" in shown
        # The confirmation carries the uploaded document on as a field: confirm it as it was.
        assert "decision counted; gate pending, 1 of 2" in submit(
            "act", decision=(None, alice.read_text())
        )
        assert "gate approved, 2 of 2" in submit("act", decision=(None, bob.read_text()))

        elsewhere = json.loads(alice.read_text())
        elsewhere["call_id"] = "c9"
        assert "not run 'r' call 'c1'" in submit("confirm", decision=(None, json.dumps(elsewhere)))
    assert cli("--db", str(db_path), "resume", "r") == 0
    results = [p for _, kind, p in records(db_path, "r") if kind == "result"]
    assert results[0]["value"] == {"wired": 500, "to": "acme"}


def test_approve_out_reads_the_call_from_the_journal_and_journals_nothing(
    tmp_path: Path, db_path: Path, keys: dict[str, Path]
) -> None:
    db = str(db_path)
    assert cli("--db", db, "run", "--run-id", "r", "--agent", "tests.cli.agents:signed_gate",
               "go") == 3  # fmt: skip
    before = records(db_path, "r")
    out = tmp_path / "d.json"
    assert cli("--db", db, "approve", "r", "c1", "--deny", "--approver", "bob",
               "--key", str(keys["bob"]), "--out", str(out)) == 0  # fmt: skip
    assert records(db_path, "r") == before
    document = json.loads(out.read_text())
    assert document["tool"] == "wire" and document["decision"]["approve"] is False
