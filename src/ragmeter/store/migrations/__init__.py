"""Alembic migrations of the results store (run by :class:`ragmeter.store.Store` on open)."""
