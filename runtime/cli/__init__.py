"""The operator CLI: ``python -m runtime`` (or ``bide``). The only part of bide that reads the
environment, configures logging and prints."""

from runtime.cli.app import main

__all__ = ["main"]
