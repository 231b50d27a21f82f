"""Leases: who drives each run, until when, under which epoch.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bide_leases",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("acquired_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("released", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_table("bide_leases")
