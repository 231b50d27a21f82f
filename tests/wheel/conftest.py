"""bide as a user installs it: the sdist and the wheel built from this checkout, the wheel
installed into a fresh venv, and a working directory from which the checkout cannot be
imported (no editable hook, no ``PYTHONPATH``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

EXTRAS = "postgres,openai,anthropic,otel,pydantic-ai,openai-agents,langgraph"
"""Every extra, so that every module of the source tree can be imported."""


@dataclass(frozen=True)
class Installed:
    """A fresh venv holding bide's wheel, and how to run a command in it."""

    venv: Path
    wheel: Path
    sdist: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        """The environment of a user's shell: this venv first on PATH, nothing of the
        checkout's (no PYTHONPATH, no journal named by the suite)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BIDE_", "PYTHON"))}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(self.venv)
        return env

    def run(
        self, *argv: str, cwd: Path, timeout: float = 120, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` run in ``cwd`` as this venv's user: ``python ...`` is the venv's."""
        program = str(self.bin / argv[0]) if (self.bin / argv[0]).exists() else argv[0]
        return subprocess.run(
            [program, *argv[1:]],
            cwd=cwd,
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the sdist, the wheel from that sdist (as ``python -m build`` does), and install
    the wheel with every extra into a new venv. Once per session.

    The build starts from a copy of the work tree's files that git would keep: what the
    checkout holds beside them (an editable install's ``*.egg-info``, a ``build/`` folder) can
    hide a package the configuration leaves out, as it did."""
    base = tmp_path_factory.mktemp("installed")
    dist, venv = base / "dist", base / "venv"
    source = _work_tree_copy(base / "source")
    _run([sys.executable, "-m", "build", "-q", "-o", str(dist), str(source)])
    (sdist,) = dist.glob("bide-*.tar.gz")
    (wheel,) = dist.glob("bide-*.whl")
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check"]
    _run([*pip, "install", f"{wheel}[{EXTRAS}]"])
    return Installed(venv, wheel, sdist)


def _work_tree_copy(to: Path) -> Path:
    """The checkout's files as they are now, tracked or new, without what .gitignore names."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        path = Path(os.fsdecode(name))
        if not (ROOT / path).is_file():  # deleted in the work tree, not yet in the index
            continue
        (to / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, to / path)
    return to
