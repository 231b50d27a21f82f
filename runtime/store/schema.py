"""The journal's tables, as SQLAlchemy Core on one MetaData. Alembic revisions create them; the
SQLite store reads and writes them by the names in ``names`` (a test keeps the two in step).

``bide_records`` is the journal itself: append-only, one row per record, unique per (run, key),
ordered by ``seq`` (commit order). ``bide_runs`` is a derived index for listing runs; every fact
in it can be rebuilt from the records, and no record is ever updated or deleted. ``bide_leases``
says who drives each run now (``runtime.ownership``): the one table whose rows are updated in
place, and the one fact the records cannot tell.
"""

from __future__ import annotations

import sqlalchemy as sa

from runtime.store.names import FORMAT_VERSION, HEAD_REVISION, INDEX_COLUMNS, VERSION_TABLE

__all__ = [
    "FORMAT_VERSION",
    "HEAD_REVISION",
    "INDEX_COLUMNS",
    "VERSION_TABLE",
    "leases",
    "metadata",
    "queue_runs",
    "queues",
    "records",
    "runs",
    "schedules",
]

metadata = sa.MetaData()

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""``seq``: 64 bits on PostgreSQL; SQLite's INTEGER PRIMARY KEY is already 64 bits (the rowid)."""

records = sa.Table(
    "bide_records",
    metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("codec", sa.Text, nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("run_id", "key", name="uq_bide_records_run_key"),
    sa.Index("ix_bide_records_run_seq", "run_id", "seq"),
)

runs = sa.Table(
    "bide_runs",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("format", sa.Integer, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("turns", sa.Integer, nullable=False, server_default="0"),
    sa.Column("detail", sa.Text, nullable=True),
    # A waiting run is due at ``due_ms`` on the clock ``due_clock`` names (this host's boot on
    # SQLite; NULL: PostgreSQL's); a record of a waking kind after ``wake_seq`` wakes it.
    sa.Column("due_ms", sa.BigInteger, nullable=True),
    sa.Column("due_clock", sa.Text, nullable=True),
    sa.Column("wake_seq", sa.BigInteger, nullable=True),
    sa.Index("ix_bide_runs_created", "created_ms", "run_id"),
    sa.Index("ix_bide_runs_status_created", "status", "created_ms", "run_id"),
    sa.Index("ix_bide_runs_status_due", "status", "due_ms"),
)

leases = sa.Table(
    "bide_leases",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("owner", sa.Text, nullable=False),  # Owner.to_json, as JSON text
    sa.Column("host", sa.Text, nullable=False),  # the owner's host, for the claim query
    sa.Column("acquired_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Column("released", sa.Boolean, nullable=False, server_default=sa.false()),
)

# Queues (``runtime.store.queues``): configuration and each queued run's place, not records. A
# queue's limits; a queued run's queue, concurrency key, priority, dedup key, debounce (not
# before, on the journal's clock named by ``clock``), and when a worker first claimed it (on
# that clock, and the journal's highest seq then); ``done`` once a claim saw it ended.
queues = sa.Table(
    "bide_queues",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("concurrency", sa.Integer, nullable=True),
    sa.Column("key_concurrency", sa.Integer, nullable=True),
    sa.Column("rate", sa.Integer, nullable=True),
    sa.Column("period_ms", sa.BigInteger, nullable=True),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

queue_runs = sa.Table(
    "bide_queue_runs",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("ckey", sa.Text, nullable=True),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("dedup_key", sa.Text, nullable=True),
    sa.Column("not_before", sa.BigInteger, nullable=True),
    sa.Column("clock", sa.Text, nullable=True),
    sa.Column("started_ms", sa.BigInteger, nullable=True),
    sa.Column("started_seq", sa.BigInteger, nullable=True),
    sa.Column("done", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Index("ix_bide_queue_runs_live", "queue", "done", "ckey"),
    sa.Index("ix_bide_queue_runs_dedup", "queue", "dedup_key"),
    sa.Index("ix_bide_queue_runs_waiting", "started_ms", "priority", "created_ms"),
)

# Schedules (``runtime.journal.schedules``): the spec as JSON (cron, time zone, agent, input,
# missed-slot policy), paused or not, the first slot it may start (wall-clock ms, UTC), and
# the newest slot started or skipped.
schedules = sa.Table(
    "bide_schedules",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("since_ms", sa.BigInteger, nullable=False),
    sa.Column("last_slot_ms", sa.BigInteger, nullable=True),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)
