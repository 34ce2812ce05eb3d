"""The results store: runs, samples, scores and persistent caches, through SQLAlchemy."""

from ragmeter.store.store import Store, default_url, open_store

__all__ = ["Store", "default_url", "open_store"]
