"""Tables of production monitoring, golden datasets and human evaluation.

Revision ID: 0003_monitor_golden_human
Revises: 0002_lean_scores

Adds ``monitor_calls`` (logged production calls), ``corpus_documents``, ``datasets`` and
``dataset_samples`` (golden datasets), and ``annotation_tasks``, ``annotation_items``,
``annotation_raters``, ``annotation_labels`` (human evaluation). Only new tables: no existing row
changes. The tables are created from their definitions as of this revision (``checkfirst``, so a
database that already has one keeps it); a later change to one of them is a revision of its own.
"""

from __future__ import annotations

from alembic import op

revision = "0003_monitor_golden_human"
down_revision = "0002_lean_scores"
branch_labels = None
depends_on = None

TABLES = ("monitor_calls", "corpus_documents", "datasets", "dataset_samples", "annotation_tasks",
          "annotation_items", "annotation_raters", "annotation_labels")


def upgrade() -> None:
    from ragmeter.store.models import Base

    bind = op.get_bind()
    for name in TABLES:  # in dependency order (dataset_samples after datasets, ...)
        Base.metadata.tables[name].create(bind, checkfirst=True)


def downgrade() -> None:
    bind = op.get_bind()
    from ragmeter.store.models import Base

    for name in reversed(TABLES):
        Base.metadata.tables[name].drop(bind, checkfirst=True)
