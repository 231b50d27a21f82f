"""``demo``: a crash right after a charge, a resume that halts the charge instead of making it
again, the charge's declared reconciler settling the halt from the ledger, and a run that
completes with one charge.

It drives the payments agent shipped in ``runtime._demo`` (``examples/payments.py`` in the
repository) through the real CLI in child processes, so what it prints is what an operator would
type and see. No network, no API key, no source checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import runtime
from runtime.cli.base import EXIT_USAGE, Command, Failure, Invocation
from runtime.journal import Journal
from runtime.store import local_file
from runtime.timeline import render, timeline

__all__ = ["COMMANDS"]

SPEC = "runtime._demo.payments:make_agent"
INPUT = "Charge ann 12.00 for the May invoice"
CRASH = "tool.after_call@3"  # lookup_customer, save_note, then charge_card: killed after it
CHILD_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class _Child:
    code: int
    stdout: str
    stderr: str


class _Demo:
    def __init__(self, inv: Invocation, db: Path | str, ledger: Path):
        # The demo's agent and the PostgreSQL stack are imported by this command alone.
        from runtime._demo import payments
        from runtime.store.postgres import display

        self.inv = inv
        self.db = db
        self.shown_db = display(db) if isinstance(db, str) else str(db)
        """The journal as printed: a PostgreSQL URL without its password."""
        self.ledger_path = ledger
        self.run_id = f"demo-{uuid.uuid4().hex[:6]}"
        self.ledger = payments.PaymentsLedger(str(ledger))

    def say(self, text: str = "") -> None:
        self.inv.out(text)

    async def cli(self, *words: str, crash: str | None = None) -> _Child:
        """Run ``python -m runtime WORDS --db DB`` as the operator would; show it and its lines."""
        args = [words[0], "--db", str(self.db), *words[1:]]
        shown = " ".join(
            [
                self.inv.prog,
                *(shlex.quote(w) for w in [words[0], "--db", self.shown_db, *words[1:]]),
            ]
        )
        self.say(f"   $ {f'BIDE_CRASH={crash} ' if crash else ''}{shown}")
        env = dict(os.environ)
        env.pop("BIDE_CRASH", None)
        if crash:
            env["BIDE_CRASH"] = crash
        env["PAYMENTS_LEDGER"] = str(self.ledger_path)
        # The children import this very bide, wherever it was imported from.
        home = str(Path(runtime.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "runtime",
            "--log-format",
            "console",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), CHILD_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise Failure(f"demo: `{shown}` took longer than {CHILD_TIMEOUT_S}s") from None
        child = _Child(process.returncode or 0, out.decode(), err.decode())
        for line in child.stderr.splitlines():
            self.say(f"     | {line}")
        return child

    def charges(self) -> int:
        return len(self.ledger.charges())

    def expect(self, what: bool, problem: str, child: _Child | None = None) -> None:
        if not what:
            if child is not None and child.stderr:
                print(child.stderr, file=sys.stderr)
            raise Failure(f"demo: {problem}")

    async def go(self) -> int:
        say = self.say
        say("bide demo: an agent charges a card, and its process is killed right after the charge.")
        say()
        say(f"  journal  {self.shown_db}")
        say(f"  ledger   {self.ledger_path}  (the payments provider of the demo's agent)")
        say()
        say("1. Run the payments agent. BIDE_CRASH arms a crash point: the process SIGKILLs")
        say("   itself right after the charge returns, before its result reaches the journal.")
        say()
        child = await self.cli("run", "--agent", SPEC, "--run-id", self.run_id, INPUT, crash=CRASH)
        self.expect(
            child.code == -signal.SIGKILL, f"the run was not killed (exit {child.code})", child
        )
        self.expect(self.charges() == 1, f"{self.charges()} charges after the crash, not 1")
        say("   -> killed by SIGKILL. The ledger holds 1 charge; the journal holds the charge's")
        say("      attempt marker and no result: bide cannot know whether the card was charged.")
        say()
        say("2. Resume it. A side effect whose outcome is unknown is never called again")
        say("   automatically: the call halts. charge_card declares a reconciler, find_charge,")
        say("   which looks the charge up in the ledger by the call's idempotency key (the charge")
        say("   stored it): it finds it, bide journals that as the halt's resolution, with its")
        say("   evidence, and the model sees the charge's result. (A tool without a reconciler")
        say("   stays halted, exit 4, until `resolve RUN_ID CALL_ID --succeeded JSON --evidence")
        say("   TEXT` says what happened.)")
        say()
        child = await self.cli("resume", self.run_id)
        self.expect(child.code == 0, f"resume exited {child.code}, not 0", child)
        self.expect(self.charges() == 1, f"{self.charges()} charges after resume, not 1")
        say(f"   -> exit 0: {child.stdout.strip()}")
        say("      The ledger still holds 1 charge.")
        say()
        say(f"3. The run's timeline ({self.inv.prog} show --db ... {self.run_id}):")
        say()
        async with Journal(self.db, migrate=False) as journal:
            state = await journal.require(self.run_id)
        for line in render(timeline(state)):
            say(f"   {line}".rstrip())
        say()
        charges = self.ledger.charges()
        say(f"The ledger: {len(charges)} charge{'s' if len(charges) != 1 else ''}.")
        for c in charges:
            say(
                f"   ch_{c['charge_id']}  {c['customer']}  {c['amount_cents']} cents  "
                f"key {c['idempotency_key']}"
            )
        self.expect(len(charges) == 1, f"the ledger holds {len(charges)} charges, not 1")
        say()
        say("Charged exactly once, across a crash, a halt and its reconciliation.")
        return 0


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="keep the demo's journal at PATH and its payments ledger beside it (both must not "
        "exist yet), or run it on a PostgreSQL database, postgresql://user@host/db (its ledger "
        "in a temporary directory); default: a temporary directory, removed afterwards. Never "
        "$BIDE_DB.",
    )


async def _demo(inv: Invocation) -> int:
    import tempfile  # (shutil, random): for this command alone

    given = getattr(inv.args, "db", None)  # never $BIDE_DB: the demo must not touch real runs
    if given and local_file(given) is None:
        # A run of its own (a fresh id) in that database; the ledger is the demo's alone.
        with tempfile.TemporaryDirectory(prefix="bide-demo-") as tmp:
            return await _Demo(inv, given, Path(tmp) / "payments-ledger.db").go()
    if given:
        db = Path(local_file(given) or given)
        ledger = db.with_name(f"{db.stem}-payments-ledger.db")
        for path in (db, ledger):
            if path.exists():
                raise Failure(f"demo: {path} exists; the demo starts afresh", EXIT_USAGE)
        return await _Demo(inv, db, ledger).go()
    with tempfile.TemporaryDirectory(prefix="bide-demo-") as tmp:
        here = Path(tmp)
        return await _Demo(inv, here / "bide.db", here / "payments-ledger.db").go()


COMMANDS = (
    Command(
        name="demo",
        summary="watch a crash after a charge end in exactly one charge (no network, no key)",
        description=(
            "Run the payments agent (examples/payments.py) in a fresh journal (a temporary\n"
            "directory; --db keeps it):\n"
            "the agent's process is killed right after it charges a card, `resume` halts instead\n"
            "of charging again, a reconciler resolves the halt from the ledger, and a last\n"
            "`resume` completes the run. Prints each step and the run's timeline."
        ),
        example="  {prog} demo\n  {prog} demo --db ./demo.db   # keep the journal and ledger",
        arguments=_demo_arguments,
        handler=_demo,
        common=False,  # its --db is its own; the journal options of other commands do not apply
    ),
)
