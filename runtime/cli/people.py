"""``approve``, ``answer``, ``signal`` and ``keygen``: what a person says to a waiting run."""

from __future__ import annotations

import argparse
import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.approval import Decision, arguments_digest, sign_decision
from runtime.cli.base import EXIT_USAGE, Command, Failure, Invocation
from runtime.cli.verbs import operator
from runtime.errors import ConfigError
from runtime.jsontext import TooDeep, parse_json

if TYPE_CHECKING:  # cryptography is imported by the commands that sign, not by the CLI
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

DECISION_FORMAT = "bide/decision/v1"
"""The ``format`` of a decision document written by ``approve --out`` (the console reads it)."""

__all__ = ["COMMANDS"]


def _approve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("call_id", metavar="CALL_ID")
    parser.add_argument("--deny", action="store_true", help="deny instead of approve (final)")
    parser.add_argument("--by", metavar="NAME", help="who decides (default: your login name)")
    parser.add_argument(
        "--approver", metavar="ID", help="for a signed (m-of-n) gate: your approver id"
    )
    parser.add_argument(
        "--key", metavar="FILE", help="for a signed gate: your private key (from `keygen`)"
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="with --key: write the signed decision to FILE instead of journaling it (for the "
        "console, or whoever holds the journal)",
    )
    parser.add_argument(
        "--tool", metavar="NAME", help="with --out and no journal: the gated call's tool name"
    )
    parser.add_argument(
        "--arguments", metavar="JSON", help="with --out and no journal: the call's arguments"
    )


async def _approve(inv: Invocation) -> int:
    args = inv.args
    if (args.approver is None) != (args.key is None):
        raise Failure("a signed decision needs both --approver ID and --key FILE", EXIT_USAGE)
    if args.out is not None:
        return await _sign_offline(inv)
    if args.tool is not None or args.arguments is not None:
        raise Failure("--tool and --arguments go with --out", EXIT_USAGE)
    async with inv.journal() as journal:
        if args.key is None:
            who = operator(inv)
            if not who:
                raise Failure("say who decides with --by NAME", EXIT_USAGE)
            decision = Decision(who, not args.deny)
        else:
            state = await journal.require(args.run_id)
            call = state.calls.get(args.call_id)
            if call is None:
                raise ConfigError(f"run {args.run_id!r} has no call {args.call_id!r}")
            decision = sign_decision(
                _private_key(args.key),
                run_id=args.run_id,
                call_id=args.call_id,
                tool=call.call.name,
                arguments=call.call.arguments,
                approver=args.approver,
                approve=not args.deny,
            )
        counted, now, reason = await journal.decide(args.run_id, args.call_id, decision)
    verb = "denial" if args.deny else "approval"
    if counted:
        inv.out(f"{verb} by {decision.approver} recorded and counted")
    else:
        inv.out(f"{verb} by {decision.approver} recorded as seen, not counted: {reason}")
    inv.out(
        f"tally: {now.outcome}, {len(now.approvals)} of {now.need} approvals"
        + (f" ({', '.join(now.approvals)})" if now.approvals else "")
        + (f"; denied by {', '.join(now.denials)}" if now.denials else "")
    )
    if now.outcome != "pending":
        inv.out(f"continue the run: {inv.command('resume', args.run_id)}")
    return 0


async def _sign_offline(inv: Invocation) -> int:
    """``approve --key FILE --out FILE``: a signed decision as a document, journaled by no one
    yet (the console accepts it as an upload). Without ``--tool`` the call is read from the
    journal; with ``--tool`` and ``--arguments`` no journal is needed."""
    args = inv.args
    if args.key is None:
        raise Failure(
            "--out writes a signed decision: give --approver ID and --key FILE", EXIT_USAGE
        )
    if (args.tool is None) != (args.arguments is None):
        raise Failure("give both --tool NAME and --arguments JSON, or neither", EXIT_USAGE)
    if args.tool is not None:
        tool, arguments = args.tool, _json_option("--arguments", args.arguments)
    else:
        async with inv.journal(migrate=False) as journal:
            state = await journal.require(args.run_id)
        call = state.calls.get(args.call_id)
        if call is None:
            raise ConfigError(f"run {args.run_id!r} has no call {args.call_id!r}")
        tool, arguments = call.call.name, call.call.arguments
    decision = sign_decision(
        _private_key(args.key),
        run_id=args.run_id,
        call_id=args.call_id,
        tool=tool,
        arguments=arguments,
        approver=args.approver,
        approve=not args.deny,
    )
    document = {
        "format": DECISION_FORMAT,
        "run_id": args.run_id,
        "call_id": args.call_id,
        "tool": tool,
        "arguments_digest": arguments_digest(arguments),
        "decision": decision.to_json(),
    }
    out = Path(args.out)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise Failure(f"{out} exists; approve --out never overwrites a file", EXIT_USAGE) from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False, indent=2)
        f.write("\n")
    verb = "denial" if args.deny else "approval"
    inv.out(f"signed {verb} by {args.approver} of call {args.call_id} ({tool}) written to {out}")
    inv.out("nothing is journaled yet: submit the file in the console (or to the journal's holder)")
    return 0


def _json_option(name: str, text: str) -> Any:
    try:
        return parse_json(text)
    except TooDeep as exc:
        raise Failure(f"{name}: {exc}, more than a journal keeps", EXIT_USAGE) from None
    except ValueError:
        raise Failure(f"{name} takes JSON, not {text!r}", EXIT_USAGE) from None


def _private_key(path: str) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Failure(f"cannot read key file {path}: {exc.strerror or exc}", EXIT_USAGE) from exc
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise Failure(f"{path} is not an unencrypted PEM private key ({exc})", EXIT_USAGE) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise Failure(f"{path} holds a {type(key).__name__}, not an Ed25519 key", EXIT_USAGE)
    return key


def _answer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("key", metavar="KEY", help="the question's key, as `show` prints it")
    parser.add_argument("--value", metavar="JSON", required=True, help="the answer, as JSON")
    parser.add_argument("--call", metavar="CALL_ID", help="the call that asked, if several did")
    parser.add_argument("--by", metavar="NAME", help="who answers (default: your login name)")


async def _answer(inv: Invocation) -> int:
    args = inv.args
    value = _json_value(args.value)
    async with inv.journal() as journal:
        new = await journal.answer(
            args.run_id, args.key, value, call_id=args.call, by=operator(inv)
        )
    if new:
        inv.out(f"answer to {args.key} recorded")
    else:
        inv.out(f"{args.key} was already answered with that value")
    inv.out(f"continue the run: {inv.command('resume', args.run_id)}")
    return 0


def _signal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("name", metavar="NAME", help="the signal's name, as the tool receives it")
    parser.add_argument(
        "--value", metavar="JSON", default="null", help="what it carries, as JSON (default null)"
    )
    parser.add_argument(
        "--id",
        metavar="SIGNAL_ID",
        dest="signal_id",
        help="an id of your own: sending it again is one signal (default: a new id)",
    )
    parser.add_argument("--by", metavar="NAME", help="who sends it (default: your login name)")


async def _signal(inv: Invocation) -> int:
    args = inv.args
    value = _json_value(args.value)
    async with inv.journal() as journal:
        new = await journal.signal(
            args.run_id, args.name, value, signal_id=args.signal_id, by=operator(inv)
        )
    if new:
        inv.out(f"signal {args.name} sent to {args.run_id}")
    else:
        inv.out(f"signal {args.signal_id} was already sent with that value")
    return 0


def _json_value(text: str) -> Any:
    try:
        return parse_json(text)
    except TooDeep as exc:
        raise Failure(f"--value: {exc}, more than a journal keeps", EXIT_USAGE) from None
    except ValueError:
        raise Failure(
            f"--value takes JSON (for a text, quote it: '\"blue\"'), not {text!r}",
            EXIT_USAGE,
        ) from None


def _keygen_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="FILE", required=True, help="the private key file to write"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing FILE and FILE.pub (a symlink is replaced, never followed)",
    )


async def _keygen(inv: Invocation) -> int:
    out = Path(inv.args.out)
    pub = Path(f"{out}.pub")
    for path in (out, pub):
        if not os.path.lexists(path):
            continue
        if not inv.args.force:
            kind = "is a symlink" if path.is_symlink() else "exists"
            raise Failure(
                f"{path} {kind}; keygen never overwrites a key (--force replaces it)", EXIT_USAGE
            )
        if path.is_dir() and not path.is_symlink():
            raise Failure(f"{path} is a directory", EXIT_USAGE)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    # Created private (0600) from the start, never readable by others even for a moment; both
    # files are new inodes (O_EXCL), so a symlink planted at either name is never written through.
    _write_new(out, pem, 0o600, replace=inv.args.force)
    _write_new(pub, public + b"\n", 0o644, replace=inv.args.force)
    inv.out(f"private key: {out} (keep it secret)")
    inv.out(f"public key:  {pub}")
    inv.out(public.decode("ascii"))
    return 0


def _write_new(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    if replace and os.path.lexists(path):
        path.unlink()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise Failure(f"cannot write {path}: {exc.strerror or exc}", EXIT_USAGE) from exc
    with os.fdopen(fd, "wb") as f:
        f.write(data)


COMMANDS = (
    Command(
        name="approve",
        summary="approve (or --deny) a call waiting at an approval gate",
        description=(
            "Record a decision on a gated call. For single_approval() one decision decides,\n"
            "journaled with --by. For an m-of-n gate sign with your key (--approver, --key);\n"
            "every decision is journaled, but only each approver's first valid one counts.\n"
            "The next `resume` opens or closes the gate."
        ),
        example=(
            "  {prog} approve inv-7 c3 --by alice\n"
            "  {prog} approve inv-7 c3 --deny --by bob\n"
            "  {prog} approve inv-7 c3 --approver alice --key alice.pem\n"
            "  {prog} approve inv-7 c3 --approver alice --key alice.pem --tool wire \\\n"
            "      --arguments '{{\"amount\": 500}}' --out decision.json"
        ),
        arguments=_approve_arguments,
        handler=_approve,
    ),
    Command(
        name="answer",
        summary="answer a question a tool asked (an interrupt or an MCP elicitation)",
        description=(
            "Journal the answer to a waiting run's question. The value must fit the schema the\n"
            "tool asked for, else nothing is recorded (exit 2). The next `resume` runs the tool\n"
            "again and it receives the answer."
        ),
        example="  {prog} answer quote-1 price --value 42",
        arguments=_answer_arguments,
        handler=_answer,
    ),
    Command(
        name="signal",
        summary="send a run a named signal, for a tool that receives it",
        description=(
            "Journal a signal in the run's mailbox. A tool's `context.receive(NAME)` takes it:\n"
            "each signal once, in the order they were sent; one sent before the receive waits\n"
            "for it. A run waiting for NAME becomes ready (a worker drives it, or `resume`).\n"
            "Sending again with the same --id is one signal; another value under it, exit 2."
        ),
        example="  {prog} signal order-7 payment-cleared --value '{{\"amount\": 500}}'",
        arguments=_signal_arguments,
        handler=_signal,
    ),
    Command(
        name="keygen",
        summary="make an Ed25519 key pair for signing approvals",
        description=(
            "Write a new private key (PEM, mode 0600) to FILE and its public key (base64) to\n"
            "FILE.pub. Put the public key in the gate's ApprovalPolicy(approvers={...}).\n"
            "An existing FILE or FILE.pub (or a symlink at either) is refused unless --force."
        ),
        example="  {prog} keygen --out alice.pem",
        arguments=_keygen_arguments,
        handler=_keygen,
    ),
)
