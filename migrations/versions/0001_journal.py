"""The journal: append-only records, and the derived index of runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# 64 bits on PostgreSQL; SQLite's INTEGER PRIMARY KEY is already 64 bits (the rowid).
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "bide_records",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("codec", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("run_id", "key", name="uq_bide_records_run_key"),
    )
    op.create_index("ix_bide_records_run_seq", "bide_records", ["run_id", "seq"])
    op.create_table(
        "bide_runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("format", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("agent", sa.Text, nullable=True),
        sa.Column("turns", sa.Integer, nullable=False, server_default="0"),
        sa.Column("detail", sa.Text, nullable=True),
    )
    op.create_index("ix_bide_runs_created", "bide_runs", ["created_ms", "run_id"])
    op.create_index("ix_bide_runs_status_created", "bide_runs", ["status", "created_ms", "run_id"])


def downgrade() -> None:
    op.drop_table("bide_runs")
    op.drop_table("bide_records")
