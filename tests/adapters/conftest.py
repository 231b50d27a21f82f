"""What the framework adapters' tests share: a journal on each backend, and the payment
provider's ledger (``tests.adapters.provider``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.provider import DROP_REPLY, LEDGER


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "bide.db")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The provider's ledger, outside the journal (``$BIDE_TEST_LEDGER``), its replies not
    lost unless a test sets ``$BIDE_TEST_DROP_REPLY``."""
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv(LEDGER, str(path))
    monkeypatch.delenv(DROP_REPLY, raising=False)
    yield path
