"""The import boundary: the core never loads an adapter or an SDK; a missing SDK names its extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_core_and_the_retry_policy_load_no_provider_sdk() -> None:
    result = run_python(
        "import sys, runtime, runtime.model, runtime.testing, adapters.models\n"
        "loaded = sorted(m for m in ('openai', 'anthropic', 'adapters.models.openai',"
        " 'adapters.models.anthropic') if m in sys.modules)\n"
        "print(loaded)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "sdk"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_importing_a_provider_without_its_sdk_is_a_config_error_naming_the_extra(
    module: str, sdk: str
) -> None:
    result = run_python(
        "import sys\n"
        f"sys.modules[{sdk!r}] = None  # what Python does for a package that is not installed\n"
        "from runtime.errors import ConfigError\n"
        "try:\n"
        f"    import adapters.models.{module}\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert f"pip install 'bide[{sdk}]'" in result.stdout
