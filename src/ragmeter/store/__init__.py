"""The results store: runs, samples, scores and persistent caches, through SQLAlchemy."""

from ragmeter.store.store import Store, StoredScore, default_url, head_revision, open_store

__all__ = ["Store", "StoredScore", "default_url", "head_revision", "open_store"]
