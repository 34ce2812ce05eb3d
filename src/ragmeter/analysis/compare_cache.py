"""Comparisons and gates of stored runs cached in the store, per pair (or set) of run versions.

A run's version (:meth:`ragmeter.store.views.StoreViews.run_version`: status, finish time, number
of scores) changes whenever its scores can; the key also holds every option of the comparison and
the ragmeter version, so a cached comparison is returned only for exactly the same question about
exactly the same scores. Baseline files and in-memory results are never cached.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from ragmeter._version import __version__
from ragmeter.core.errors import StoreError

NAMESPACE = "compare-cache"


#: how comparisons are computed; a change of method makes earlier cached comparisons misses
#: (2: the turns of conversations are compared per conversation; 3: all-equal differences get the
#: same interval on every path, clustered or not)
METHOD = 3


def cache_key(store: Any, refs: list[Any], options: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """``(key, runs)`` for stored runs named by ``refs`` (``runs``: id, name and label of each), or
    ``None`` when a reference is not a stored run (a file, a result object) or there is no store."""
    if store is None or not hasattr(store, "run_version"):
        return None
    runs, parts = [], []
    for ref in refs:
        if not isinstance(ref, str):
            return None
        path = Path(ref)
        if path.suffix.lower() == ".json" or path.is_file():
            return None
        try:
            run = store.get_run(ref)
        except StoreError:
            return None
        runs.append({"id": run.id, "name": run.name,
                     "label": f"{run.name} ({run.id})" if run.name else run.id})
        parts.append([run.id, store.run_version(run)])
    text = json.dumps({"runs": parts, "options": options, "version": __version__, "method": METHOD},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest(), runs


def get(store: Any, key: str) -> dict[str, Any] | None:
    """The cached record of a comparison (or a gate), or ``None``."""
    return store.kv_get(NAMESPACE, key)


def put(store: Any, key: str, record: dict[str, Any]) -> None:
    """Keep a comparison's (or a gate's) record (a failure to write the cache is not theirs)."""
    try:
        store.kv_put(NAMESPACE, key, record)
    except SQLAlchemyError:  # a read-only or busy store still compares
        return
