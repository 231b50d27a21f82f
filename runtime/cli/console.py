"""``console``: serve the web console over HTTP, on the loopback address unless told otherwise."""

from __future__ import annotations

import argparse
import ipaddress
import sys

from runtime.cli.base import EXIT_USAGE, Command, Failure, Invocation
from runtime.cli.verbs import operator

__all__ = ["COMMANDS", "TOKEN_VARIABLE"]

TOKEN_VARIABLE = "BIDE_CONSOLE_TOKEN"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind (default 8765)")
    parser.add_argument(
        "--operator",
        metavar="NAME",
        dest="by",
        help="who acts through this console, journaled as `by` (default: your login name)",
    )
    parser.add_argument(
        "--operator-header",
        metavar="HEADER",
        help="behind a trusted proxy: the request header naming who acts (e.g. X-Forwarded-User)",
    )


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _console(inv: Invocation) -> int:
    import secrets

    import uvicorn

    from runtime.console import Console

    args = inv.args
    token = inv.environ.get(TOKEN_VARIABLE)
    if not loopback(args.host) and not token:
        raise Failure(
            f"--host {args.host} is reachable from other machines: set ${TOKEN_VARIABLE} to a "
            "secret token of your choice first (the console refuses to make one up there)",
            EXIT_USAGE,
        )
    made = not token
    token = token or secrets.token_urlsafe(24)
    if not 1 <= args.port <= 65535:
        raise Failure(f"--port must be between 1 and 65535, not {args.port}", EXIT_USAGE)
    journal = inv.journal(migrate=False)
    await journal.open()  # fail now, with the CLI's message, if there is no journal or schema
    who = None if args.operator_header else operator(inv)
    app = Console(journal, token=token, operator=who, operator_header=args.operator_header)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    inv.out(f"bide console for {journal.path}")
    inv.out(f"open: {url}?token={token}" if made else f"open: {url}?token=${TOKEN_VARIABLE}")
    inv.out(f"acting as: {who}" if who else f"acting as: the {args.operator_header} header")
    inv.stdout.flush()
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", lifespan="off", access_log=False
    )
    try:
        await uvicorn.Server(config).serve()
    finally:
        await journal.close()
    print("bide console stopped", file=sys.stderr)
    return 0


COMMANDS = (
    Command(
        name="console",
        summary="serve the web console: runs, timelines, resolve, approve, answer, cancel",
        description=(
            "Serve the web console for the journal on http://HOST:PORT/. Every request needs a\n"
            f"token: ${TOKEN_VARIABLE}, or one made up and printed at start. Binding an address\n"
            f"other than loopback needs ${TOKEN_VARIABLE} set. What a person does through it is\n"
            "journaled as the CLI verbs journal it, with --operator (or the trusted proxy's\n"
            "--operator-header) as who did it."
        ),
        example=(
            "  {prog} console --operator alice\n"
            f"  {TOKEN_VARIABLE}=... {{prog}} console --host 0.0.0.0 --operator-header "
            "X-Forwarded-User"
        ),
        arguments=_arguments,
        handler=_console,
    ),
)
