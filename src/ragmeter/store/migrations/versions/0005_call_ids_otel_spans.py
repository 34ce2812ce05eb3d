"""Whole call ids and persisted OpenTelemetry spans.

Revision ID: 0005_call_ids_otel_spans
Revises: 0004_compact_samples

``monitor_calls.call_id`` grows from 128 to 1,024 characters: ids are kept whole (they used to be
cut at 128 characters, so two long ids could become one and a call was lost). SQLite does not
enforce the length of a VARCHAR, so only other databases change the column. Adds ``otel_spans``:
spans received by the OTLP endpoint whose trace has no root yet, kept in the store instead of in
the server's memory.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_call_ids_otel_spans"
down_revision = "0004_compact_samples"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.alter_column("monitor_calls", "call_id", type_=sa.String(1024),
                        existing_type=sa.String(128), existing_nullable=True)
    if not sa.inspect(bind).has_table("otel_spans"):
        op.create_table(
            "otel_spans",
            sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("trace_id", sa.String(32), nullable=False),
            sa.Column("span_id", sa.String(16), nullable=False),
            sa.Column("received_at", sa.DateTime, nullable=False),
            sa.Column("data", sa.JSON, nullable=False),
            sa.UniqueConstraint("trace_id", "span_id"),
        )
        op.create_index("ix_otel_spans_received_at", "otel_spans", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_otel_spans_received_at", table_name="otel_spans")
    op.drop_table("otel_spans")
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("monitor_calls", "call_id", type_=sa.String(128),
                        existing_type=sa.String(1024), existing_nullable=True)
