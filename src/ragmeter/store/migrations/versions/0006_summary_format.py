"""The format version of a run's summary.

Revision ID: 0006_summary_format
Revises: 0005_call_ids_otel_spans

Adds ``runs.summary_format``: the version of the JSON in ``runs.summary``
(:data:`ragmeter.store.records.FORMAT_VERSION`). Runs stored before keep ``NULL`` and are read as
version 0 (:meth:`ragmeter.store.records.RunSummary.from_stored`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_summary_format"
down_revision = "0005_call_ids_otel_spans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("runs")}
    if "summary_format" not in columns:
        op.add_column("runs", sa.Column("summary_format", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("summary_format")
