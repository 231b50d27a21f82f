"""Who drives a run: the lease a drive holds, its owner, and whether that owner is alive.

A drive acquires its run's lease before it appends anything and holds it until the drive ends
(``runtime.holding``). The lease expires on the store's clock unless its holder renews it;
taking over an expired (or provably dead) lease bumps its ``epoch``, and every append a drive
makes carries the epoch it holds, so a store refuses the appends of a drive whose lease another
owner has taken (fencing). Claiming a run, for a worker, is acquiring its lease.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from runtime.errors import LeaseLost, ProtocolError, RunBusy

__all__ = [
    "DEFAULT_TTL",
    "SEND_MARGIN",
    "Lease",
    "Owner",
    "boot_id",
    "boot_wall_ms",
    "boottime_ms",
    "busy",
    "is_alive",
    "lease_from_row",
    "lost",
    "pid_namespace",
    "process_start",
    "send_deadline",
    "this_host",
]

DEFAULT_TTL = 15.0
"""Seconds a lease lasts unless renewed; its holder renews it every third of that."""

SEND_MARGIN = 2.0
"""Seconds before its lease could end by which a driver stops sending side effects (a quarter of
the TTL when that is shorter): a stall between the last check and the send that is shorter than
this still sends while the lease lives. See ``send_deadline``."""


def send_deadline(requested_at: float, ttl: float) -> float:
    """The ``time.monotonic()`` past which a driver holding a lease sends no side effect, for a
    lease granted (or renewed) for ``ttl`` seconds by a request sent at ``requested_at``.

    The journal measures the lease from when it granted it, which is after the request left, so
    the lease lives at least until ``requested_at + ttl`` on a clock that runs at this one's
    rate; the margin leaves room for the send itself."""
    return requested_at + ttl - min(SEND_MARGIN, ttl / 4)


def boottime_ms() -> int:
    """Milliseconds since this machine booted, counting suspended time: a clock that steps of
    the wall clock (NTP, an operator, a VM resumed) do not move. The journal's clock on SQLite,
    where every process that shares the file shares this host."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1_000_000


@functools.cache
def boot_wall_ms() -> int | None:
    """When this machine booted, on the wall clock, to the second (Linux ``btime``): added to
    ``boottime_ms`` it shows a boot-time reading as a wall-clock time, the same in every
    process (to show, never to decide)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return int(line.split()[1]) * 1000
    except (OSError, ValueError):
        pass
    return None


@functools.cache
def boot_id() -> str | None:
    """This boot's id (Linux): a lease or marker timed on another boot's clock belongs to a
    process that is gone, and its times cannot be compared with this boot's."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


@functools.cache
def pid_namespace() -> str | None:
    """This process's PID namespace (``pid:[4026531836]``): pids of one host name another
    process in another namespace (a container), so only an owner of the same namespace can be
    looked up by pid."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_host() -> str:
    """This machine's name in leases: ``$BIDE_HOST`` if set (for containers that share a
    hostname, or to stand for another machine in a test), else the host name. Processes that
    give the same name must see each other's pids: a lease of a gone pid on this host is taken
    over at once."""
    return os.environ.get("BIDE_HOST") or _hostname()


@functools.cache
def _hostname() -> str:
    return socket.gethostname()


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), or None if unknown.

    A pid is reused once its process is gone; the start time tells the new process from the
    old one.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22, starttime
    except (IndexError, ValueError):  # pragma: no cover - a kernel that changed /proc
        return None


@functools.cache
def _own_start(pid: int) -> int | None:
    """This process's start time (by pid: a forked child asks for its own)."""
    return process_start(pid)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, and belongs to someone else
        return True
    return True


@dataclass(frozen=True, slots=True)
class Owner:
    """The process (or worker) that holds or held a lease."""

    id: str
    """Unique per drive: two drives of one process are two owners."""
    host: str
    pid: int
    pid_start: int | None
    """The process's start time (``process_start``), to tell a reused pid from the holder."""
    started_ms: int
    worker: str | None = None
    """The worker's name, when a worker drives the run."""
    boot: str | None = None
    """The boot of the machine it ran on (``boot_id``); None if an older bide wrote it."""
    pidns: str | None = None
    """Its PID namespace (``pid_namespace``); None if an older bide wrote it."""

    @classmethod
    def here(cls, *, worker: str | None = None) -> Owner:
        """A new owner for a drive in this process."""
        pid = os.getpid()
        return cls(
            id=os.urandom(16).hex(),  # as unique as a uuid4, without building one
            host=this_host(),
            pid=pid,
            pid_start=_own_start(pid),
            started_ms=int(time.time() * 1000),
            worker=worker,
            boot=boot_id(),
            pidns=pid_namespace(),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "started_ms": self.started_ms,
            "worker": self.worker,
        }
        if self.boot is not None:
            data["boot"] = self.boot
        if self.pidns is not None:
            data["pidns"] = self.pidns
        return data

    @classmethod
    def from_json(cls, data: Any) -> Owner:
        """An owner read back from a journal; ``ProtocolError`` if it is not one."""
        try:
            if isinstance(data, str):
                data = json.loads(data)
            owner = cls(
                id=data["id"],
                host=data["host"],
                pid=data["pid"],
                pid_start=data.get("pid_start"),
                started_ms=data.get("started_ms") or 0,
                worker=data.get("worker"),
                boot=data.get("boot"),
                pidns=data.get("pidns"),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ProtocolError(f"a lease's owner is not readable: {data!r:.200}") from exc
        if not (
            isinstance(owner.id, str)
            and isinstance(owner.host, str)
            and isinstance(owner.pid, int)
            and isinstance(owner.started_ms, int)
            and (owner.pid_start is None or isinstance(owner.pid_start, int))
            and (owner.worker is None or isinstance(owner.worker, str))
            and (owner.boot is None or isinstance(owner.boot, str))
            and (owner.pidns is None or isinstance(owner.pidns, str))
        ):
            raise ProtocolError(f"a lease's owner is not readable: {data!r:.200}")
        return owner

    def describe(self) -> str:
        """``worker w-3 (host h, pid 123)`` or ``process 123 on host h``."""
        if self.worker:
            return f"worker {self.worker} (host {self.host}, pid {self.pid})"
        return f"process {self.pid} on host {self.host}"

    def same_machine(self) -> bool:
        """Whether this owner's pid names a process this one can look up: the same host name,
        and, where the owner recorded them, the same boot and the same PID namespace. A
        container that shares the host name but not the namespace, or a machine of the same
        name, is another machine here: its owner is never known to be gone."""
        if self.host != this_host():
            return False
        if self.boot is not None and self.boot != boot_id():
            return False
        return self.pidns is None or self.pidns == pid_namespace()

    def gone(self) -> bool:
        """True when this owner is a process of this machine (``same_machine``) that no longer
        exists (or whose pid another process now has). Any other owner is never known to be
        gone: its lease is waited out."""
        if not self.same_machine():
            return False
        if not _pid_exists(self.pid):
            return True
        if self.pid_start is None:
            return False
        now = process_start(self.pid)
        return now is not None and now != self.pid_start


@dataclass(frozen=True, slots=True)
class Lease:
    """A run's lease as the store holds it."""

    run_id: str
    epoch: int
    """Bumped by every acquisition; an append carrying an older epoch is refused."""
    owner: Owner
    acquired_ms: int
    expires_ms: int
    """On the store's clock (SQLite: the writer's; PostgreSQL: ``now()``)."""
    released: bool
    live: bool
    """Held, by the store's clock when it was read: not released and not expired."""
    wall_offset_ms: int = field(default=0, compare=False)
    """This process's wall clock minus the store's clock when the lease was read: the store's
    times plus this are wall-clock times, for people to read (never to decide with)."""

    ends_ms: int | None = field(default=None, compare=False)
    """When the lease ends (or ended) on the store's clock, where ``expires_ms`` is on another
    (a SQLite lease of another boot, or an older bide's on the wall clock): see ``end_ms``."""

    @property
    def end_ms(self) -> int:
        """When the lease ends or ended, on the store's clock (``Store.clock_ms``): its expiry,
        or its release (a release sets the expiry to that moment)."""
        return self.expires_ms if self.ends_ms is None else self.ends_ms

    def wall_ms(self, ms: int) -> int:
        """A time of this lease (on the store's clock) as a wall-clock time, to show."""
        return ms + self.wall_offset_ms

    def to_json(self) -> dict[str, Any]:
        """The lease as ``show --json`` gives it: its times as wall-clock epoch milliseconds."""
        return {
            "epoch": self.epoch,
            "owner": self.owner.to_json(),
            "acquired_ms": self.wall_ms(self.acquired_ms),
            "expires_ms": self.wall_ms(self.expires_ms),
            "released": self.released,
            "live": self.live,
        }


def is_alive(lease: Lease | None) -> bool:
    """Whether a lease is held by a live owner: live by the store's clock, and not held by a
    process of this host that is gone (that one counts as expired at once)."""
    return lease is not None and lease.live and not lease.owner.gone()


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def busy(lease: Lease) -> RunBusy:
    """The refusal a second driver gets: who drives the run, since when, until when."""
    return RunBusy(
        f"run {lease.run_id} is being driven by {lease.owner.describe()} since "
        f"{_clock(lease.wall_ms(lease.acquired_ms))}; lease until "
        f"{_clock(lease.wall_ms(lease.expires_ms))}",
        lease=lease,
        run_id=lease.run_id,
    )


def lease_from_row(
    run_id: str,
    epoch: int,
    owner: str | Owner,
    acquired_ms: int,
    expires_ms: int,
    released: bool,
    now_ms: int,
    *,
    live: bool | None = None,
    wall_offset_ms: int = 0,
    ends_ms: int | None = None,
) -> Lease:
    """A lease read from a store's row; ``live`` judged against the store's ``now_ms`` unless
    the store judged it (``live=``).

    ``owner`` is the row's JSON, or the ``Owner`` a caller knows it holds (it just acquired or
    renewed this lease): that one is kept rather than read again."""
    return Lease(
        run_id=run_id,
        epoch=epoch,
        owner=owner if isinstance(owner, Owner) else Owner.from_json(owner),
        acquired_ms=acquired_ms,
        expires_ms=expires_ms,
        released=bool(released),
        live=(not released and expires_ms > now_ms) if live is None else live,
        wall_offset_ms=wall_offset_ms,
        ends_ms=ends_ms,
    )


def lost(lease: Lease, epoch_now: int | None) -> LeaseLost:
    """The error a drive gets once its lease is over: another owner took it, or it expired
    before it was renewed (an expired lease is never renewed: it may have been judged over)."""
    if epoch_now == lease.epoch:
        what = "expired before it was renewed (an expired lease is over, taken or not)"
    else:
        now = (
            "it has no lease now" if epoch_now is None else f"another owner holds epoch {epoch_now}"
        )
        what = f"was taken over ({now})"
    return LeaseLost(
        f"run {lease.run_id!r}: this drive's lease (epoch {lease.epoch}) {what}; it appends "
        "nothing more and runs no further tool",
        run_id=lease.run_id,
        taken_over=epoch_now is not None and epoch_now != lease.epoch,
    )
