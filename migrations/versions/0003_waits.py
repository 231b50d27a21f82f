"""Waits: when a waiting run is due, on which clock, and after which record it wakes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bide_runs") as table:
        table.add_column(sa.Column("due_ms", sa.BigInteger, nullable=True))
        table.add_column(sa.Column("due_clock", sa.Text, nullable=True))
        table.add_column(sa.Column("wake_seq", sa.BigInteger, nullable=True))
    op.create_index("ix_bide_runs_status_due", "bide_runs", ["status", "due_ms"])


def downgrade() -> None:
    op.drop_index("ix_bide_runs_status_due", table_name="bide_runs")
    with op.batch_alter_table("bide_runs") as table:
        table.drop_column("wake_seq")
        table.drop_column("due_clock")
        table.drop_column("due_ms")
