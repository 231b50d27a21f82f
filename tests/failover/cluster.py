"""A pg_auto_failover cluster on this machine's loopback, for one test: a monitor, a primary and
a synchronous secondary, each a ``pg_autoctl`` process group started as an unprivileged user
under a directory of its own, on free ports (the server the rest of the suite uses is never
touched). ``kill`` SIGKILLs a node's whole group (keeper and PostgreSQL at once), as a machine
dying would; ``close`` kills every group and removes the directory.

The monitor's timers are shortened (``TIMERS``) so a failover takes seconds, not a minute:
safe here, since a node this harness kills is dead, not partitioned."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["TIMERS", "Cluster", "unavailable"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"
DATABASE = "bide"

TIMERS = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 5000,
}
"""Milliseconds (and tries) the monitor waits before it declares the primary gone and lets the
secondary take writes (defaults: 5 s, 5 s, 2, 2 s, 20 s and 30 s)."""


def unavailable() -> str | None:
    """Why this machine cannot run the cluster, or ``None`` if it can."""
    if shutil.which("pg_autoctl") is None:
        return "pg_autoctl is not installed (Debian: apt-get install postgresql-15-auto-failover)"
    if not (PG_BIN / "pg_ctl").exists():
        return f"PostgreSQL 15's binaries are not in {PG_BIN}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            return f"running as root, and there is no {USER!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start PostgreSQL as another user"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """The cluster's processes and ports; ``start()`` returns once the secondary is in sync."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bide-failover-"))
        self.ports = {"monitor": free_port(), "node1": free_port(), "node2": free_port()}
        self.groups: dict[str, subprocess.Popen[bytes]] = {}
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chmod(self.root, 0o755)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", USER, "--"]
        else:
            self._as = []
        self._env = {
            "PATH": f"{PG_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.root),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "LANG": "C.UTF-8",
        }

    # --- commands ----------------------------------------------------------------------------

    def _argv(self, *args: str) -> list[str]:
        env = [f"{k}={v}" for k, v in self._env.items()]
        return [*self._as, "env", "-i", *env, "pg_autoctl", *args]

    def _ctl(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            self._argv(*args), capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.groups[name] = subprocess.Popen(
                self._argv(*args), stdout=log, stderr=log, start_new_session=True
            )
        finally:
            log.close()

    def _pgdata(self, name: str) -> str:
        return str(self.root / name)

    def _node_args(self, name: str) -> list[str]:
        return [
            "--pgdata",
            self._pgdata(name),
            "--pgport",
            str(self.ports[name]),
            "--hostname",
            "127.0.0.1",
            "--listen",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
            "--pgctl",
            str(PG_BIN / "pg_ctl"),
        ]

    # --- life --------------------------------------------------------------------------------

    def start(self, *, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        self._ctl("create", "monitor", *self._node_args("monitor"))
        self._spawn("monitor", "run", "--pgdata", self._pgdata("monitor"))
        self._wait(lambda: self._sql("monitor", "pg_auto_failover", "SELECT 1"), deadline)
        statements = [f"ALTER SYSTEM SET {k} = {v}" for k, v in TIMERS.items()]
        self._sql("monitor", "pg_auto_failover", *statements, "SELECT pg_reload_conf()")
        monitor = (
            f"postgres://autoctl_node@127.0.0.1:{self.ports['monitor']}/pg_auto_failover"
            "?sslmode=disable"
        )
        for name in ("node1", "node2"):
            self._spawn(
                name,
                "create",
                "postgres",
                *self._node_args(name),
                "--monitor",
                monitor,
                "--dbname",
                "test",
                "--name",
                name,
                "--run",
            )
            want = "single" if name == "node1" else "secondary"
            # pg_basebackup waits for a spread checkpoint: ask the primary for one now.
            poke = name == "node2"
            self._wait(lambda n=name, w=want, p=poke: self._reached(n, w, poke=p), deadline)
        self._wait(lambda: self._reached("node1", "primary"), deadline)
        # pg_auto_failover's database holds its extension's tables: bide gets one of its own.
        self._sql("node1", "test", f"CREATE DATABASE {DATABASE}")

    def _reached(self, name: str, want: str, *, poke: bool = False) -> bool:
        if poke:
            with contextlib.suppress(Exception):
                self._sql("node1", "test", "CHECKPOINT")
        node = self.nodes().get(name)
        return node is not None and node["reported"] == node["assigned"] == want

    def _wait(self, ready: Any, deadline: float) -> None:
        while True:
            with contextlib.suppress(Exception):
                if ready():
                    return
            for name, p in self.groups.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited: {self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster did not come up: {self.nodes()}")
            time.sleep(0.5)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Each node's reported and assigned state and its port, as the monitor says."""
        out = self._ctl("show", "state", "--pgdata", self._pgdata("monitor"), "--json")
        return {
            n["nodename"]: {
                "reported": n["current_group_state"],
                "assigned": n["assigned_group_state"],
                "port": int(n["nodeport"]),
            }
            for n in json.loads(out)
        }

    def primary(self) -> str:
        """The node that takes writes now."""
        for name in ("node1", "node2"):
            if self.writable(name):
                return name
        raise RuntimeError("no node takes writes")

    def writable(self, name: str) -> bool:
        """Whether ``name`` accepts a connection that may write (what read-write asks)."""
        try:
            rows = self._sql(
                name,
                "test",
                "SELECT NOT pg_is_in_recovery() AND NOT current_setting("
                "'default_transaction_read_only')::bool",
            )
        except Exception:
            return False
        return rows == ["t"]

    def url(self, database: str = DATABASE) -> str:
        """The multi-host URL a service would be given (both nodes, the primary wanted)."""
        hosts = ",".join(f"127.0.0.1:{self.ports[n]}" for n in ("node1", "node2"))
        return f"postgresql://{USER}@{hosts}/{database}?target_session_attrs=read-write"

    def kill(self, name: str) -> None:
        """SIGKILL the node's keeper, its postmaster and every backend at once."""
        doomed = self._postgres(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.groups[name].pid, signal.SIGKILL)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.groups[name].wait()

    def _postgres(self, name: str) -> list[int]:
        """The node's postmaster and its children (each of which PostgreSQL puts in a session
        of its own, out of reach of the keeper's group)."""
        try:
            postmaster = int((self.root / name / "postmaster.pid").read_text().split()[0])
            command = Path(f"/proc/{postmaster}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return []
        if str(self.root / name).encode() not in command:
            return []  # gone, and its pid is another process's now
        found = [postmaster]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == postmaster:
                found.append(int(entry.name))
        return found

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for name in list(self.groups):
            self.kill(name)
        for p in self.groups.values():
            with contextlib.suppress(Exception):
                p.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def _sql(self, name: str, database: str, *statements: str) -> list[str]:
        argv = [
            str(PG_BIN / "psql"),
            "-X",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.ports[name]),
            "-U",
            USER,
            "-d",
            database,
        ]
        for statement in statements:
            argv += ["-c", statement]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env={"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "3"},
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip())
        return done.stdout.split()
