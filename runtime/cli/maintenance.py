"""``migrate``: bring the journal's schema to this bide's revision, or check that it is there."""

from __future__ import annotations

import argparse

from runtime.cli.base import Command, Invocation
from runtime.store import ensure, names

__all__ = ["COMMANDS"]


def _migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 2 unless the schema is this bide's revision",
    )
    parser.add_argument(
        "--allow-foreign",
        action="store_true",
        help="add bide's tables to a database that holds other programs' tables (refused "
        "otherwise)",
    )


async def _migrate(inv: Invocation) -> int:
    path = await ensure(inv.db, migrate=not inv.args.check, allow_foreign=inv.args.allow_foreign)
    inv.out(f"journal {path} is at schema revision {names.HEAD_REVISION}")
    return 0


COMMANDS = (
    Command(
        name="migrate",
        summary="create or upgrade the journal's schema (--check only verifies it)",
        description=(
            "Create the journal, or upgrade its schema to the revision this bide needs. Safe to\n"
            "run while other processes use the journal, and again (it does nothing when current).\n"
            "A journal written by a newer bide is refused, and so is a database that holds\n"
            "other tables (unless --allow-foreign). With --check, nothing is changed."
        ),
        example=(
            "  {prog} migrate --db /var/lib/bide/bide.db\n  {prog} migrate --check\n"
            "  {prog} migrate --db postgresql://bide@db.internal/bide"
        ),
        arguments=_migrate_arguments,
        handler=_migrate,
    ),
)
