"""Compact run samples: drop the index on ``run_samples.run_id`` alone.

Revision ID: 0004_compact_samples
Revises: 0003_monitor_golden_human

The unique index on ``(run_id, sample_id)`` already serves every lookup by run (its first column),
so ``ix_run_samples_run_id`` only cost space (about 25 bytes a sample) and insert time. The sample
data itself needs no rewrite: on SQLite new rows are compressed (``ragmeter.store.codec``) and the
JSON text of older rows is still read as it is; PostgreSQL keeps JSON.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_compact_samples"
down_revision = "0003_monitor_golden_human"
branch_labels = None
depends_on = None


def upgrade() -> None:
    names = {ix["name"] for ix in sa.inspect(op.get_bind()).get_indexes("run_samples")}
    if "ix_run_samples_run_id" in names:
        op.drop_index("ix_run_samples_run_id", table_name="run_samples")


def downgrade() -> None:
    op.create_index("ix_run_samples_run_id", "run_samples", ["run_id"])
