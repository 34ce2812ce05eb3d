"""Metric families. Each module registers its metrics on import; see :mod:`ragmeter.metrics.base`."""

from ragmeter.metrics.base import (
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
