"""The journal on a highly available PostgreSQL (pg_auto_failover: a monitor, a primary and a
synchronous secondary) survives the primary dying mid-run: worker and driver processes reach it
through a multi-host URL, the primary is SIGKILLed mid-charge (and, in another schedule, while
a worker's group commit is in flight), the secondary is promoted, and then every run completes
or halts for a stated reason, no call is executed twice (an external ledger), and nothing a
caller was told is committed is missing.

A slow set (``-m slow``): each schedule builds a cluster of its own (about 20 s) and tears it
down. Skipped, with the reason, where pg_auto_failover is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import Journal, Resolution
from tests.conftest import child_env
from tests.failover.cluster import Cluster, unavailable
from tests.postgres import server
from tests.postgres.test_workers import rows

pytestmark = pytest.mark.slow

RUNS = 60
"""Runs the driver starts (a third of them it drives itself, the rest the workers do)."""
TTL = 3.0
KILL_AFTER = 10
"""Charges in the ledger before the primary is killed: mid-run, with runs still being started."""
STOP_AT = 40
"""The record write before whose COMMIT the group-commit schedule's worker is stopped."""
DEADLINE = 240.0

LOG_EVENTS = (
    "journal_connection_lost",
    "journal_listen_lost",
    "lease_renew_failed",
    "worker_claim_failed",
)
"""Events a worker logs once when the database goes away (and once more when it is back)."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.close()


def spawn(argv: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=child_env(**env), stdout=out, stderr=out)


def worker(url: str, name: str, tmp: Path, **env: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "runtime", "worker", "--db", url, "--name", name]
    argv += ["--concurrency", "4", "--poll", "0.2", "--lease-ttl", str(TTL)]
    argv += ["--log-format", "json"]
    return spawn(argv, tmp / f"{name}.log", BIDE_HOST=f"host-{name}", **env)


def stopped(p: subprocess.Popen[bytes]) -> bool:
    try:
        return Path(f"/proc/{p.pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"
    except OSError:
        return False


def events(log: Path) -> Counter[str]:
    """How many times each event of ``LOG_EVENTS`` a worker logged at warning or above."""
    seen: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(event, dict)
            and event.get("event") in LOG_EVENTS
            and event.get("level") in ("warning", "error")
        ):
            seen[event["event"]] += 1
    return seen


def all_runs(url: str) -> dict[str, str]:
    return {str(r): str(s) for r, s in rows(url, "SELECT run_id, status FROM bide_runs")}


def first_end_after(url: str, killed_ms: int) -> int | None:
    found = rows(
        url,
        f"SELECT min(created_ms) FROM bide_records WHERE key = 'end' AND created_ms > {killed_ms}",
    )
    return None if found[0][0] is None else int(found[0][0])


def failover(cluster: Cluster, tmp: Path, schedule: str) -> dict[str, Any]:
    url = cluster.url()
    ledger, told = tmp / "ledger", tmp / "told"
    effects = {"LEDGER": str(ledger), "CHARGE_PAUSE": "0.3"}
    # The journal's tables, made once through the URL every process is given.
    server.run(_migrate(url))
    stop = {"BIDE_CRASH": f"write.before_commit@{STOP_AT}:stop"} if schedule == "commit" else {}
    workers = {
        "w-a": worker(url, "w-a", tmp, **effects, **stop),
        "w-b": worker(url, "w-b", tmp, **effects),
    }
    driver = spawn(
        [sys.executable, "-m", "tests.failover.driver", url, str(RUNS), str(told)],
        tmp / "driver.log",
        **effects,
    )
    everyone = [*workers.values(), driver]
    figures: dict[str, Any] = {"schedule": schedule}
    try:
        deadline = time.monotonic() + DEADLINE
        old = cluster.primary()
        new = "node2" if old == "node1" else "node1"
        if schedule == "charge":
            # Right after a charge's effect, while its result is on its way to the journal.
            while len(ledger.read_text().splitlines() if ledger.exists() else []) < KILL_AFTER:
                assert time.monotonic() < deadline, "no charges"
                time.sleep(0.005)
        else:
            # A worker stopped with its batch written and COMMIT not yet sent: the primary
            # dies, then the worker sends COMMIT to it.
            while not stopped(workers["w-a"]):
                assert workers["w-a"].poll() is None, (tmp / "w-a.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker never reached its stop"
                time.sleep(0.005)
        killed = time.time()
        cluster.kill(old)
        if schedule == "commit":
            workers["w-a"].send_signal(signal.SIGCONT)
        figures["charges_before_kill"] = len(ledger.read_text().splitlines())
        while not cluster.writable(new):
            assert time.monotonic() < deadline, f"no promotion: {cluster.nodes()}"
            time.sleep(0.05)
        figures["promoted_s"] = round(time.time() - killed, 2)
        halted: list[dict[str, Any]] = []
        while True:
            assert time.monotonic() < deadline, Counter(all_runs(url).values())
            server.run(reconcile(url, ledger, halted))
            runs = all_runs(url)
            if driver.poll() is not None and all(s == "completed" for s in runs.values()):
                break
            time.sleep(0.2)
        first = first_end_after(url, int(killed * 1000))
        figures["first_completed_s"] = None if first is None else round(first / 1000 - killed, 2)
        figures["halted"] = len(halted)
        figures["halted_found_in_ledger"] = sum(h["found"] for h in halted)
        figures["halt_causes"] = sorted({str(h["cause"])[:90] for h in halted})
        assert all(h["cause"] for h in halted), halted
        for p in workers.values():
            p.send_signal(signal.SIGTERM)
        for p in workers.values():
            p.wait(timeout=60)
    finally:
        for p in everyone:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)  # never leave a stopped process behind
                p.kill()
                p.wait()
    assert driver.returncode == 0, (tmp / "driver.log").read_text()[-3000:]
    figures["logged"] = {n: dict(events(tmp / f"{n}.log")) for n in workers}
    return figures | check(url, ledger, told)


async def _migrate(url: str) -> None:
    async with Journal(url):
        pass


async def reconcile(url: str, ledger: Path, halted: list[dict[str, Any]]) -> None:
    """Resolve each halted call by the ledger, as a reconciler would (found: it succeeded;
    absent: it was not executed), noting why it halted: the halt record's cause, or, where the
    drive could not write one (the database was away), the resume matrix's own reason."""
    charged = set(ledger.read_text().splitlines()) if ledger.exists() else set()
    async with Journal(url) as journal:
        for row in (await journal.list_runs(status="halted", limit=RUNS)).runs:
            state = await journal.require(row.run_id)
            for c in state.halted_calls():
                found = f"{row.run_id} {c.call.id}" in charged
                record = c.halts.get(c.attempt)
                cause = (
                    record.payload.get("cause")
                    if record is not None
                    else "attempt marker without a result, and no live owner"
                )
                await journal.resolve(
                    row.run_id,
                    c.call.id,
                    Resolution.succeeded({"charged": 5}) if found else Resolution.not_executed(),
                    attempt=c.attempt,
                    by="reconciler",
                )
                halted.append({"run": row.run_id, "found": found, "cause": cause})


def check(url: str, ledger: Path, told: Path) -> dict[str, Any]:
    """The schedule's verdict: what the issue asks, each a failing assertion if broken."""
    runs = all_runs(url)
    acknowledged = [line.split()[0] for line in told.read_text().splitlines()]
    # Nothing a caller was told is committed is missing: each run the driver was told about...
    missing = [r for r in acknowledged if r not in runs]
    assert not missing, f"runs acknowledged to the driver and lost: {missing}"
    # ...and each attempt marker, which was committed before its charge left (the ledger).
    markers = {
        (str(r), str(k).split("/")[1])
        for r, k in rows(url, "SELECT run_id, key FROM bide_records WHERE key LIKE 'attempt/%'")
    }
    charges = [tuple(line.split()) for line in ledger.read_text().splitlines()]
    unmarked = [c for c in charges if c not in markers]
    assert not unmarked, f"charges whose committed attempt marker is gone: {unmarked}"
    # At most one execution per call (exactly one, since every run completed).
    twice = {c: n for c, n in Counter(charges).items() if n > 1}
    assert not twice, f"calls executed twice: {twice}"
    assert Counter(charges) == Counter((r, "c1") for r in runs)
    # Every run completed (halts resolved by the ledger, each halt journaled with its cause).
    assert set(runs.values()) == {"completed"}, Counter(runs.values())
    halts = rows(url, "SELECT run_id, payload FROM bide_records WHERE key LIKE 'halt/%'")
    assert all(json.loads(p).get("cause") for _, p in halts), halts
    # Nothing after an end record, and no run driven by two owners at once (epochs in order).
    late = rows(
        url,
        "SELECT r.run_id, r.key FROM bide_records r JOIN bide_records e "
        "ON e.run_id = r.run_id AND e.key = 'end' WHERE r.seq > e.seq AND r.key NOT LIKE 'late/%'",
    )
    assert not late, late
    last: dict[str, int] = {}
    for run_id, payload in rows(url, "SELECT run_id, payload FROM bide_records ORDER BY seq"):
        epoch = json.loads(payload).get("epoch") if payload.startswith("{") else None
        if epoch is not None:
            assert epoch >= last.get(run_id, 0), f"run {run_id}: epoch {epoch} after a newer one"
            last[run_id] = epoch
    return {
        "runs": len(runs),
        "acknowledged": len(acknowledged),
        "charges": len(charges),
        "halt_records": len(halts),
    }


def report(figures: dict[str, Any]) -> None:
    print("\nfailover:", json.dumps(figures, sort_keys=True), flush=True)
    out = os.environ.get("BIDE_FAILOVER_FIGURES")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(figures, sort_keys=True) + "\n")


def test_primary_killed_mid_charge_loses_nothing_and_fires_nothing_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    figures = failover(cluster, tmp_path, "charge")
    report(figures)
    for name, seen in figures["logged"].items():
        assert all(n <= 2 for n in seen.values()), (name, seen)


def test_primary_killed_mid_group_commit_loses_nothing_and_fires_nothing_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    figures = failover(cluster, tmp_path, "commit")
    report(figures)
    # The stopped worker's COMMIT went to a dead server: its outcome was unknown, not guessed.
    log = (tmp_path / "w-a.log").read_text()
    assert "journal_commit_outcome_unknown" in log
    assert "journal_commit_outcome_learned" not in log  # the new primary cannot vouch for it
    for name, seen in figures["logged"].items():
        assert all(n <= 2 for n in seen.values()), (name, seen)
