"""``main``: the parser built from the command table, logging, and errors turned into exit codes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn

from runtime import __version__, faults
from runtime.cli import (
    console,
    demo,
    drive,
    maintenance,
    people,
    reconcile,
    schedules,
    sessions,
    verbs,
    verify,
    view,
    worker,
)
from runtime.cli.base import (
    EXIT_BUSY,
    EXIT_ERROR,
    EXIT_PIPE,
    EXIT_USAGE,
    Command,
    Failure,
    Invocation,
)
from runtime.cli.logs import configured
from runtime.errors import (
    BideError,
    ConfigError,
    CorruptJournal,
    RunBusy,
    SchemaError,
    SessionBusy,
    StorageError,
)
from runtime.store import local_file
from runtime.store.sqlite.migrate import damage

__all__ = ["COMMANDS", "main"]

COMMANDS: tuple[Command, ...] = (
    *drive.COMMANDS,
    *worker.COMMANDS,
    *schedules.COMMANDS,
    *view.COMMANDS,
    *sessions.COMMANDS,
    *verbs.COMMANDS,
    *reconcile.COMMANDS,
    *people.COMMANDS,
    *maintenance.COMMANDS,
    *verify.COMMANDS,
    *demo.COMMANDS,
    *console.COMMANDS,
)
"""Every subcommand, in the order ``--help`` lists them. A new command is one more entry."""

DESCRIPTION = """\
bide runs AI agents durably: every model turn and tool call is journaled in SQLite, so a run
killed at any moment resumes where it stopped, and a side effect whose outcome is unknown halts
the run instead of firing twice.

exit codes: 0 completed, 1 failed or error, 2 usage or configuration error, 3 waiting,
4 halted, 5 cancelled, 6 another live process drives the run (141: stdout was closed early,
as by `| head`). The journal is --db, else $BIDE_DB, else ./bide.db.
"""

EXAMPLE = """\
example:
  {prog} demo
  {prog} run --agent myagents.support:agent --run-id ticket-42 "Refund order 1234"
  {prog} list --status halted
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors read like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"bide: error: {message}\n")


def _common() -> _Parser:
    # Accepted before or after the command. SUPPRESS keeps a subcommand's unset option from
    # overwriting a value given before the command.
    common = _Parser(add_help=False)
    options = common.add_argument_group("common options")
    options.add_argument(
        "--db",
        metavar="URL_OR_PATH",
        default=argparse.SUPPRESS,
        help="the journal: a file path, sqlite+aiosqlite:///path or postgresql://user@host/db "
        "(default $BIDE_DB, ./bide.db)",
    )
    options.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="debug logs, and a traceback with any error",
    )
    options.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no progress lines, only warnings and errors",
    )
    options.add_argument(
        "--log-format",
        choices=("auto", "console", "json"),
        default=argparse.SUPPRESS,
        help="progress lines on stderr: console or JSON lines (auto: console on a terminal)",
    )
    return common


def build_parser(prog: str) -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EXAMPLE.format(prog=prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"bide {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", required=True
    )
    for command in COMMANDS:
        sub = commands.add_parser(
            command.name,
            help=command.summary,
            description=command.description,
            epilog="example:\n" + command.example.format(prog=prog),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common] if command.common else [],
        )
        command.arguments(sub)
        sub.set_defaults(handler=command.handler)
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "bide") -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    verbose = getattr(args, "verbose", False)
    level = logging.INFO
    if verbose:
        level = logging.DEBUG
    elif getattr(args, "quiet", False):
        level = logging.WARNING
    with configured(level=level, fmt=getattr(args, "log_format", "auto")):
        invocation = Invocation(args, prog=prog, environ=os.environ, stdout=sys.stdout)
        handler: Callable[[Invocation], Coroutine[Any, Any, int]] = args.handler
        try:
            faults.arm_from_environment()  # crash points, for the crash suite and the demo
            return asyncio.run(handler(invocation))
        except KeyboardInterrupt:
            print("bide: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return _stdout_closed()
        except Exception as exc:
            try:
                return _report(invocation, exc, verbose=verbose)
            except BrokenPipeError:
                return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (``show --json | head``): say nothing more, and exit as a
    process killed by SIGPIPE reads in a shell. What is still buffered goes to /dev/null, so
    the interpreter's last flush does not fail either."""
    with contextlib.suppress(OSError, ValueError):  # no real file descriptor (tests capture)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_PIPE


def _report(invocation: Invocation, exc: Exception, *, verbose: bool) -> int:
    if isinstance(exc, Failure):
        message, code = exc.message, exc.code
    elif isinstance(exc, RunBusy | SessionBusy):
        message, code = str(exc), EXIT_BUSY
    elif isinstance(exc, ConfigError | SchemaError):
        message, code = str(exc), EXIT_USAGE
    elif isinstance(exc, CorruptJournal):  # the journal, not the run, needs fixing
        message, code = f"{type(exc).__name__}: {exc}", EXIT_USAGE
    elif isinstance(exc, StorageError) and (found := _damage(invocation, exc)) is not None:
        message, code = found, EXIT_USAGE
    elif isinstance(exc, BideError):
        message, code = f"{type(exc).__name__}: {exc}", EXIT_ERROR
    else:
        message = f"unexpected {type(exc).__name__}: {exc}"
        if not verbose:
            message += " (run again with -v for the traceback)"
        code = EXIT_ERROR
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    if getattr(invocation.args, "json", False):
        invocation.out_json(
            {"error": {"type": _kind(exc, code), "message": message, "exit_code": code}}
        )
    print(f"bide: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def _damage(invocation: Invocation, exc: StorageError) -> str | None:
    """After a storage error: whether the journal file itself is damaged, said in one line."""
    try:
        path = local_file(invocation.db)
    except BideError:
        return None
    if path is None:
        return None
    found = damage(path) if os.path.isfile(path) else None
    if found is None:
        return None
    said = exc.__cause__ if isinstance(exc.__cause__, sqlite3.DatabaseError) else found
    return f"{path} is not a bide journal or is damaged (sqlite: {said})"


def _kind(exc: Exception, code: int) -> str:
    """The error's type for ``--json``: what bide raised, not the CLI's wrapper around it."""
    if isinstance(exc, Failure):
        if isinstance(exc.__cause__, Exception):
            return type(exc.__cause__).__name__
        return "ConfigError" if code == EXIT_USAGE else "BideError"
    return type(exc).__name__
