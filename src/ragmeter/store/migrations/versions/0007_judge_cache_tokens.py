"""Prompt-cache tokens of each judge call.

Revision ID: 0007_judge_cache_tokens
Revises: 0006_summary_format

Adds ``judge_calls.cached_input_tokens`` and ``judge_calls.cache_write_tokens``: of a call's input
tokens, those the provider read from its prompt cache (OpenAI's
``usage.prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``) and those
it wrote to it (Anthropic's ``cache_creation_input_tokens``), priced at the cache-read and
cache-write prices. Calls stored before keep 0.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_judge_cache_tokens"
down_revision = "0006_summary_format"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("judge_calls")}
    for name in ("cached_input_tokens", "cache_write_tokens"):
        if name not in columns:
            op.add_column("judge_calls", sa.Column(name, sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("judge_calls") as batch:
        batch.drop_column("cache_write_tokens")
        batch.drop_column("cached_input_tokens")
