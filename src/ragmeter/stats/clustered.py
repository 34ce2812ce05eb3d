"""The mean of clustered values: the assistant turns of one conversation are not independent (the
same assistant, the same user, the same history), so an interval that treats them as independent
is too narrow.

:func:`cluster_mean_ci` is the cluster-robust interval of a mean: the mean of all values, its
variance the CR1 sandwich estimate over clusters,
``G/(G-1) * sum_g (sum_{i in g} (y_i - mean))^2 / N^2`` (Liang & Zeger 1986; Cameron & Miller
2015, "A Practitioner's Guide to Cluster-Robust Inference"), the interval ``mean +- t(G-1) * se``
with ``G`` clusters, clipped to the values' range. The paired comparison of two runs of the same
clustered samples is in :mod:`ragmeter.stats.paired` (``clusters=``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.stats.intervals import Bounds, t_quantile


def cluster_codes(clusters: Sequence[str]) -> tuple[np.ndarray, int]:
    """``(codes, G)``: each value's cluster as an integer in ``0 .. G-1``, numbered in order of
    first appearance (so one value per cluster keeps the values' order), and the number of
    clusters."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(str(c), len(index)) for c in clusters), dtype=np.int64,
                        count=len(clusters))
    return codes, len(index)


def cluster_mean_ci(values: Sequence[float] | np.ndarray, clusters: Sequence[str], *, level: float = 0.95,
                    bounds: Bounds = None) -> tuple[float, float] | None:
    """Cluster-robust (CR1) interval of the mean of ``values`` (NaN: no value, left out) whose
    ``clusters[i]`` says which cluster value ``i`` belongs to; ``None`` with fewer than two
    clusters holding a value.

    Equal to statsmodels' intercept-only OLS with ``cov_type="cluster"`` and ``use_t=True``.

    Example:
        >>> [round(v, 3) for v in cluster_mean_ci([0.9, 0.8, 0.2, 0.3, 0.6, 0.5, 0.7], list("aabbccd"))]
        [0.119, 1.024]
        >>> [round(v, 3) for v in cluster_mean_ci([0.9, 0.8, 0.2, 0.3, 0.6, 0.5, 0.7], list("aabbccd"), bounds=(0, 1))]
        [0.119, 1.0]
    """
    if not 0 < level < 1:
        raise MetricError(f"level must be in (0, 1), got {level}")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size != len(clusters):
        raise MetricError(f"{x.size} values but {len(clusters)} cluster labels")
    keep = ~np.isnan(x)
    x = x[keep]
    if x.size == 0:
        return None
    codes, g = cluster_codes([c for c, k in zip(clusters, keep.tolist(), strict=True) if k])
    if g < 2:
        return None
    n = x.size
    mean = float(x.mean())
    sums = np.bincount(codes, weights=x - mean, minlength=g)
    se = math.sqrt(g / (g - 1) * float(np.sum(sums ** 2)) / n ** 2)
    half = t_quantile(0.5 + level / 2, g - 1) * se
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, float(bounds[0])), min(high, float(bounds[1]))
    return low, high
