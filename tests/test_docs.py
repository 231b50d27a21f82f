"""Every Python example in the README and docs/ runs: a doc example that does not run is a bug."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, child_env

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for n, code in enumerate(BLOCK.findall(doc.read_text(encoding="utf-8")), start=1):
            found.append((f"{doc.relative_to(ROOT)}#{n}", code))
    return found


@pytest.mark.parametrize(("where", "code"), examples(), ids=[w for w, _ in examples()])
def test_the_example_runs(where: str, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
