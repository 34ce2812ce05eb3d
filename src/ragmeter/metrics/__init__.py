"""Metric families. Each module registers its metrics on import; see :mod:`ragmeter.metrics.registry`.

The registry's names below are loaded on first use, so that importing one family's kernels (e.g.
``ragmeter.metrics.retrieval.trec_measures`` for ``ragmeter trec``) does not load the registry and
the schema.

A metric only scores: it never reads files, prints, starts a process or touches the store (the
services it needs come from its scoring context); tests/test_architecture.py holds the imports
this package may not make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmeter.metrics.registry import (
        MetricRequest,
        MetricSpec,
        all_metrics,
        get_spec,
        metric,
        register_metric,
        resolve,
        resolve_all,
    )

__all__ = ["MetricRequest", "MetricSpec", "all_metrics", "get_spec", "metric", "register_metric",
           "resolve", "resolve_all"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ragmeter.metrics import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'ragmeter.metrics' has no attribute {name!r}")
