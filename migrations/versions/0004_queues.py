"""Queues and schedules: each queue's limits, each queued run's place, each schedule.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bide_queues",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("concurrency", sa.Integer, nullable=True),
        sa.Column("key_concurrency", sa.Integer, nullable=True),
        sa.Column("rate", sa.Integer, nullable=True),
        sa.Column("period_ms", sa.BigInteger, nullable=True),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "bide_queue_runs",
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
    )
    op.create_index("ix_bide_queue_runs_live", "bide_queue_runs", ["queue", "done", "ckey"])
    op.create_index("ix_bide_queue_runs_dedup", "bide_queue_runs", ["queue", "dedup_key"])
    op.create_index(
        "ix_bide_queue_runs_waiting", "bide_queue_runs", ["started_ms", "priority", "created_ms"]
    )
    op.create_table(
        "bide_schedules",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("since_ms", sa.BigInteger, nullable=False),
        sa.Column("last_slot_ms", sa.BigInteger, nullable=True),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("bide_schedules")
    op.drop_index("ix_bide_queue_runs_waiting", table_name="bide_queue_runs")
    op.drop_index("ix_bide_queue_runs_dedup", table_name="bide_queue_runs")
    op.drop_index("ix_bide_queue_runs_live", table_name="bide_queue_runs")
    op.drop_table("bide_queue_runs")
    op.drop_table("bide_queues")
