"""Baseline: the schema ragmeter wrote before the store was versioned.

Revision ID: 0001_baseline
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("ragmeter_version", sa.String(40), nullable=False),
        sa.Column("dataset_source", sa.Text),
        sa.Column("dataset_fingerprint", sa.String(64), nullable=False),
        sa.Column("n_samples", sa.Integer, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("timings", sa.JSON, nullable=False),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("extra", sa.JSON, nullable=False),
    )
    op.create_table(
        "run_samples",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("sample_id", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_id", "sample_id"),
    )
    op.create_index("ix_run_samples_run_id", "run_samples", ["run_id"])
    op.create_table(
        "scores",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("sample_id", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float),
        sa.Column("reason", sa.Text),
        sa.Column("details", sa.JSON),
        sa.UniqueConstraint("run_id", "sample_id", "metric"),
    )
    op.create_index("ix_scores_run_metric", "scores", ["run_id", "metric"])
    op.create_table(
        "embedding_cache",
        sa.Column("model_id", sa.String(300), primary_key=True),
        sa.Column("text_hash", sa.String(64), primary_key=True),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "judge_cache",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(50), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("response", sa.JSON, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "judge_calls",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32)),
        sa.Column("metric", sa.String(200)),
        sa.Column("sample_id", sa.String(200)),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(50), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("latency_ms", sa.Float),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_judge_calls_run_id", "judge_calls", ["run_id"])
    op.create_table(
        "kv",
        sa.Column("namespace", sa.String(100), primary_key=True),
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("value", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    for table in ("kv", "judge_calls", "judge_cache", "embedding_cache", "scores", "run_samples", "runs"):
        op.drop_table(table)
