"""Draw ``bench/workers.py --json FILE``'s curve as a PNG: runs per second against worker
processes, each round's points and their median, linear scaling from one worker, and the
one-primary ceilings: the raw commit rate on 16 connections, and on one (bide's writes take
turns on one lock held through COMMIT), each over the write transactions a run took there.

matplotlib is not one of bide's dependencies: run this with one that has it, e.g.
``python3 -m venv /tmp/plot && /tmp/plot/bin/pip install matplotlib &&
/tmp/plot/bin/python bench/workers_plot.py workers.json bench/workers.png``.
"""

from __future__ import annotations

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(source: str, target: str) -> None:
    with open(source, encoding="utf-8") as f:
        data = json.load(f)
    points = data["points"]
    counts = sorted({p["workers"] for p in points})
    median = [
        statistics.median(p["runs_per_s"] for p in points if p["workers"] == n) for n in counts
    ]
    writes = [
        statistics.median(p["write_tx_per_run"] for p in points if p["workers"] == n)
        for n in counts
    ]
    raw_1 = statistics.median(r["raw_1"] for r in data["raw"])
    raw_16 = statistics.median(r["raw_16"] for r in data["raw"])
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=110)
    ax.scatter(
        [p["workers"] for p in points],
        [p["runs_per_s"] for p in points],
        s=14,
        color="#999999",
        label="each round",
        zorder=2,
    )
    ax.plot(counts, median, marker="o", color="#1f5fa8", label="median", zorder=3)
    ax.plot(
        counts,
        [median[0] * n for n in counts],
        linestyle="--",
        color="#1f5fa8",
        alpha=0.5,
        label="linear from 1 worker",
    )
    ax.plot(
        counts,
        [raw_16 / w for w in writes],
        linestyle=":",
        color="#b03a2e",
        label="raw commits/s on 16 connections / write tx per run",
    )
    ax.plot(
        counts,
        [raw_1 / w for w in writes],
        linestyle="-.",
        color="#b03a2e",
        label="raw commits/s on 1 connection / write tx per run",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.set_yscale("log")
    ax.set_xlabel("worker processes (2 cores, database on the same machine)")
    ax.set_ylabel("runs per second")
    ax.set_title("bide workers on one PostgreSQL")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(target)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
