"""Lean scores (metric ids, sample positions, clustered key), unbounded id columns, run lease and tags.

Revision ID: 0002_lean_scores
Revises: 0001_baseline

Every stored score is carried over: its metric name moves to ``metric_names`` and its sample id is
replaced by the sample's position in the run (``run_samples.position``). JSON ``null`` details
become SQL NULL. On PostgreSQL the bounded VARCHAR id columns become TEXT, so ids longer than 200
characters are stored (SQLite never enforced those lengths).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_lean_scores"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

_WIDEN = {  # table -> columns that were VARCHAR(n) and hold ids or names of any length
    "runs": ["id", "name"],
    "run_samples": ["run_id", "sample_id"],
    "embedding_cache": ["model_id"],
    "judge_cache": ["provider", "model"],
    "judge_calls": ["run_id", "metric", "sample_id", "provider", "model"],
    "kv": ["namespace", "key"],
}


def _details_sql(dialect: str, col: str) -> str:
    if dialect == "postgresql":
        return f"CASE WHEN {col}::text = 'null' THEN NULL ELSE {col} END"
    return f"NULLIF({col}, 'null')"


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    if dialect != "sqlite":
        for table, cols in _WIDEN.items():
            for col in cols:
                op.alter_column(table, col, type_=sa.Text())
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("tags", sa.JSON))
        batch.add_column(sa.Column("owner", sa.Text))
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime))

    op.create_table("metric_names",
                    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                    sa.Column("name", sa.Text, nullable=False, unique=True))
    op.execute("INSERT INTO metric_names (name) SELECT DISTINCT metric FROM scores ORDER BY metric")
    op.create_table(
        "scores_lean",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("metric_id", sa.Integer, sa.ForeignKey("metric_names.id"), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("value", sa.Float),
        sa.Column("reason", sa.Text),
        sa.Column("details", sa.JSON),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO scores_lean (run_id, metric_id, position, value, reason, details) "
        f"SELECT s.run_id, m.id, rs.position, s.value, s.reason, {_details_sql(dialect, 's.details')} "
        "FROM scores s JOIN metric_names m ON m.name = s.metric "
        "JOIN run_samples rs ON rs.run_id = s.run_id AND rs.sample_id = s.sample_id")
    op.drop_index("ix_scores_run_metric", table_name="scores")
    op.drop_table("scores")
    op.rename_table("scores_lean", "scores")


def downgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "scores_wide",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("sample_id", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float),
        sa.Column("reason", sa.Text),
        sa.Column("details", sa.JSON),
        sa.UniqueConstraint("run_id", "sample_id", "metric"),
    )
    op.execute(
        "INSERT INTO scores_wide (run_id, sample_id, metric, value, reason, details) "
        "SELECT s.run_id, rs.sample_id, m.name, s.value, s.reason, s.details "
        "FROM scores s JOIN metric_names m ON m.id = s.metric_id "
        "JOIN run_samples rs ON rs.run_id = s.run_id AND rs.position = s.position "
        "ORDER BY s.run_id, rs.position, m.name")
    op.drop_table("scores")
    op.rename_table("scores_wide", "scores")
    op.create_index("ix_scores_run_metric", "scores", ["run_id", "metric"])
    op.drop_table("metric_names")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("owner")
        batch.drop_column("tags")
    if bind.dialect.name != "sqlite":
        for table, cols in _WIDEN.items():
            for col in cols:
                op.alter_column(table, col, type_=sa.String(300))
