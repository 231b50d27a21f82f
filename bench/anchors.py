"""Physical anchors every benchmark prints first, measured in the same run (BENCHMARKS.md)."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Anchors:
    fsync_us: float
    commit_1_us: float
    """One-row commit, WAL, synchronous=FULL (median, microseconds)."""
    commit_100_us: float
    """100-row commit, WAL, synchronous=FULL (median, microseconds per commit)."""

    @property
    def rows_per_s_batched(self) -> float:
        return 100 / (self.commit_100_us / 1e6)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> str:
    parts = [f"Python {platform.python_version()}", f"SQLite {sqlite3.sqlite_version}"]
    for dist in ("sqlalchemy", "aiosqlite"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} absent")
    return ", ".join(parts)


def measure(directory: str | None = None, *, ones: int = 500, batches: int = 50) -> Anchors:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = os.path.join(tmp, "fsync.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT)
        samples = []
        try:
            for _ in range(200 if ones >= 500 else 20):
                os.write(fd, b"x" * 64)
                t = time.perf_counter()
                os.fsync(fd)
                samples.append(time.perf_counter() - t)
        finally:
            os.close(fd)
        fsync_us = statistics.median(samples) * 1e6
        conn = sqlite3.connect(os.path.join(tmp, "raw.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE r (seq INTEGER PRIMARY KEY, run_id TEXT, key TEXT, payload TEXT, "
            "UNIQUE (run_id, key))"
        )
        payload = "x" * 200
        one = []
        for i in range(ones):
            t = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO r (run_id, key, payload) VALUES (?, ?, ?)", ("a", f"{i}", payload)
            )
            conn.execute("COMMIT")
            one.append(time.perf_counter() - t)
        hundred = []
        for b in range(batches):
            rows = [("b", f"{b}-{i}", payload) for i in range(100)]
            t = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO r (run_id, key, payload) VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
            hundred.append(time.perf_counter() - t)
        conn.close()
    return Anchors(
        fsync_us=fsync_us,
        commit_1_us=statistics.median(one) * 1e6,
        commit_100_us=statistics.median(hundred) * 1e6,
    )


class RawSampler:
    """The raw anchors again, on one warmed-up file, for a reading beside each repetition.

    The disk is shared: its commit latency drifts from minute to minute, so each repetition is
    divided by the anchors sampled just before and just after it. The file is warmed past its
    first WAL checkpoint first, since a WAL that is still growing costs more per fsync than one
    being reused, and the journal under test is past that point too.
    """

    def __init__(self, directory: str):
        path = os.path.join(directory, "raw-sampler.db")
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS r (seq INTEGER PRIMARY KEY, run_id TEXT, key TEXT, "
            "payload TEXT, UNIQUE (run_id, key))"
        )
        self._n = 0
        for _ in range(6):
            self.sample()

    def _commit(self, rows: int) -> float:
        self._n += 1
        batch = [("a", f"{self._n}-{i}", "x" * 200) for i in range(rows)]
        t = time.perf_counter()
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany("INSERT INTO r (run_id, key, payload) VALUES (?, ?, ?)", batch)
        self._conn.execute("COMMIT")
        return time.perf_counter() - t

    def sample(self) -> Anchors:
        one = statistics.median(self._commit(1) for _ in range(100))
        hundred = statistics.median(self._commit(100) for _ in range(20))
        return Anchors(fsync_us=0.0, commit_1_us=one * 1e6, commit_100_us=hundred * 1e6)

    def close(self) -> None:
        self._conn.close()


def bracket(before: Anchors, after: Anchors) -> Anchors:
    """The mean of the anchors measured just before and just after one repetition."""
    return Anchors(
        fsync_us=(before.fsync_us + after.fsync_us) / 2,
        commit_1_us=(before.commit_1_us + after.commit_1_us) / 2,
        commit_100_us=(before.commit_100_us + after.commit_100_us) / 2,
    )


def header(anchors: Anchors) -> str:
    return "\n".join(
        [
            f"machine: {cpu_model()}, {os.cpu_count()} cores",
            f"versions: {versions()}",
            f"anchor fsync (median of 200): {anchors.fsync_us:.0f} us",
            f"anchor raw sqlite3 WAL FULL 1-row commit (median): {anchors.commit_1_us:.0f} us",
            f"anchor raw sqlite3 WAL FULL 100-row commit (median): {anchors.commit_100_us:.0f} us"
            f" = {anchors.rows_per_s_batched:,.0f} rows/s",
        ]
    )


def spread(samples: list[float]) -> str:
    """Median with min-max, for repeated scenario runs."""
    return f"{statistics.median(samples):.1f} (min {min(samples):.1f}, max {max(samples):.1f})"
