"""``python -m runtime``: the operator CLI."""

from runtime.cli import main

raise SystemExit(main(prog="python -m runtime"))
