"""What every command shares: its table entry, the invocation it runs in, and the exit codes."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from runtime.errors import ConfigError
from runtime.journal import Journal
from runtime.logs import get_logger
from runtime.ownership import DEFAULT_TTL
from runtime.redact import redact
from runtime.result import RunStatus
from runtime.store import exists, local_file

__all__ = [
    "EXIT_BUSY",
    "EXIT_CANCELLED",
    "EXIT_ERROR",
    "EXIT_HALTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "EXIT_WAITING",
    "Command",
    "Failure",
    "Invocation",
    "exit_code",
]

EXIT_OK = 0
EXIT_ERROR = 1  # the run failed, or the command did
EXIT_USAGE = 2  # a usage or configuration error: fix the command, the agent or the database
EXIT_WAITING = 3
EXIT_HALTED = 4
EXIT_CANCELLED = 5
EXIT_BUSY = 6  # another live owner drives the run (its lease is held): wait, or let it finish
EXIT_PIPE = 141  # stdout's reader went away (`| head`): what a shell reports for SIGPIPE

_BY_STATUS = {
    RunStatus.COMPLETED: EXIT_OK,
    RunStatus.FAILED: EXIT_ERROR,
    RunStatus.WAITING: EXIT_WAITING,
    RunStatus.HALTED: EXIT_HALTED,
    RunStatus.CANCELLED: EXIT_CANCELLED,
    RunStatus.RUNNING: EXIT_ERROR,  # a drive never stops "running"; if it did, that is an error
    RunStatus.SUBMITTED: EXIT_OK,
}

LEASE_TTL_VARIABLE = "BIDE_LEASE_TTL"


def _lease_ttl_from_environment() -> float:
    text = os.environ.get(LEASE_TTL_VARIABLE)
    if not text:
        return DEFAULT_TTL
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ConfigError(f"${LEASE_TTL_VARIABLE} must be a positive number of seconds: {text!r}")
    return value


DEFAULT_DB = "bide.db"
DB_VARIABLE = "BIDE_DB"


def exit_code(status: RunStatus) -> int:
    """The exit code of a ``run`` or ``resume`` that stopped in ``status``."""
    return _BY_STATUS[status]


class Failure(Exception):
    """A command cannot do what it was asked: one line for the operator, and an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its name, its help, how it reads its arguments, and what it does.

    ``example`` is shown by ``--help`` under the description; ``{prog}`` in it is replaced by how
    the CLI was invoked (``bide`` or ``python -m runtime``). The handler returns the exit code.
    A command with ``common=False`` declares every option it takes itself (they still parse
    before the command name).
    """

    name: str
    summary: str
    description: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[Invocation], Coroutine[Any, Any, int]]
    common: bool = True
    """Whether the command takes the common options (--db, -v, -q, --log-format) after its name."""


class Invocation:
    """One run of the CLI: parsed arguments, where output goes, and the journal it names."""

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        prog: str,
        environ: Mapping[str, str],
        stdout: TextIO,
    ):
        self.args = args
        self.prog = prog
        self.environ = environ
        self.stdout = stdout
        self.log = get_logger("runtime.cli")

    @property
    def db(self) -> str:
        """``--db``, else ``$BIDE_DB``, else ``./bide.db``."""
        given = getattr(self.args, "db", None)
        return given or self.environ.get(DB_VARIABLE) or DEFAULT_DB

    def journal(
        self, *, create: bool = False, migrate: bool = True, lease_ttl: float | None = None
    ) -> Journal:
        """The journal to open. Only ``create`` makes a new file; ``migrate=False`` (for the
        commands that only read) never changes the file, it only checks its schema. Drives
        hold leases of ``lease_ttl`` seconds, else ``$BIDE_LEASE_TTL``, else the default."""
        if not create and not exists(self.db):
            raise ConfigError(
                f"no journal at {local_file(self.db)}; name it with --db or ${DB_VARIABLE} "
                "(a `run` creates it)"
            )
        ttl = lease_ttl if lease_ttl is not None else _lease_ttl_from_environment()
        return Journal(self.db, migrate=migrate, lease_ttl=ttl)

    def out(self, text: str = "") -> None:
        print(text, file=self.stdout)

    def out_json(self, value: Any) -> None:
        print(json.dumps(value, ensure_ascii=False, indent=2), file=self.stdout)

    def command(self, name: str, *words: str) -> str:
        """A command line to suggest, as this CLI was invoked: ``bide resume --db x.db r1``."""
        given = getattr(self.args, "db", None)
        if given:
            words = ("--db", redact(given), *words)  # a URL's password stays out of the output
        return " ".join([self.prog, name, *(shlex.quote(w) for w in words)])

    def resolve_command(self, run_id: str, call_id: str, attempt: int | None) -> str:
        """The ``resolve`` command to suggest for a halted call: from its second attempt on it
        names the attempt (``--attempt N``), as ``resolve`` then requires."""
        named = () if (attempt or 1) == 1 else ("--attempt", str(attempt))
        return self.command("resolve", run_id, call_id, *named)
