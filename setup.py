"""The package list: every package under runtime/ and adapters/ as found on disk (a folder of
data, such as the console's static files, included), and the Alembic scripts (kept at the
repository root) as ``runtime._migrations``. Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

FOUND = find_namespace_packages(
    include=["runtime", "runtime.*", "adapters", "adapters.*"], exclude=["*.__pycache__"]
)
MIGRATIONS = ["runtime._migrations", "runtime._migrations.versions"]

setup(packages=FOUND + MIGRATIONS)
