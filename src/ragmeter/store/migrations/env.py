"""Alembic environment: migrations run on the connection the Store hands over (never a URL here)."""

from __future__ import annotations

from alembic import context

from ragmeter.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
