"""The mean of clustered values: the assistant turns of one conversation are not independent (the
same assistant, the same user, the same history), so an interval that treats them as independent
is too narrow.

:func:`cluster_mean_ci` is the cluster-robust interval of a mean: the mean of all values, its
variance the CR1 sandwich estimate over clusters,
``G/(G-1) * sum_g (sum_{i in g} (y_i - mean))^2 / N^2`` (Liang & Zeger 1986; Cameron & Miller
2015, "A Practitioner's Guide to Cluster-Robust Inference"), the interval ``mean +- t(G-1) * se``
with ``G`` clusters, clipped to the values' range. The paired comparison of two runs of the same
clustered samples is in :mod:`ragmeter.stats.paired` (``clusters=``).

When every cluster's mean equals the overall mean (all values equal, or all paired differences
0: nothing changed), the sandwich variance is 0 and ``mean +- t * 0`` would claim certainty. The
interval is then the one :func:`ragmeter.stats.mean_ci` gives ``G`` equal values (docs/statistics.md):
``constant`` (``[v - pi (v - low), v + pi (high - v)]``, ``pi = 1 - (alpha/2)^(1/G)``) or, at a bound,
``clopper_pearson`` of 0 or ``G`` out of ``G``: the same interval a per-conversation metric with
the same ``G`` equal values gets, whatever the number of turns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.stats.intervals import Bounds, _effective_bounds, mean_ci_rows, t_quantile


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

    Equal to statsmodels' intercept-only OLS with ``cov_type="cluster"`` and ``use_t=True``, except
    when every cluster mean is the overall mean (the sandwich variance is 0): then the interval of
    ``G`` equal values (:func:`cluster_interval`, module docstring), never a zero-width one inside
    a declared range.

    Example:
        >>> [round(v, 3) for v in cluster_mean_ci([0.9, 0.8, 0.2, 0.3, 0.6, 0.5, 0.7], list("aabbccd"))]
        [0.119, 1.024]
        >>> [round(v, 3) for v in cluster_mean_ci([0.9, 0.8, 0.2, 0.3, 0.6, 0.5, 0.7], list("aabbccd"), bounds=(0, 1))]
        [0.119, 1.0]
        >>> [round(v, 3) for v in cluster_mean_ci([0.0] * 5, list("aabbb"), bounds=(-1, 1))]  # 2 clusters
        [-0.842, 0.842]
    """
    got = cluster_interval(values, clusters, level=level, bounds=bounds)
    return None if got is None else (got[0], got[1])


def cluster_interval(values: Sequence[float] | np.ndarray, clusters: Sequence[str], *, level: float = 0.95,
                     bounds: Bounds = None) -> tuple[float, float, str] | None:
    """:func:`cluster_mean_ci` with the method that made it: ``"cluster_robust"`` (CR1), or, when
    every cluster mean equals the overall mean, the method :func:`ragmeter.stats.mean_ci` uses for
    ``G`` equal values (``"constant"``, ``"clopper_pearson"``)."""
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
    if se <= 1e-12 * max(1.0, float(np.abs(x).max())):
        return _equal_clusters(x, mean, g, level, bounds)
    half = t_quantile(0.5 + level / 2, g - 1) * se
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, float(bounds[0])), min(high, float(bounds[1]))
    return low, high, "cluster_robust"


def _equal_clusters(x: np.ndarray, mean: float, g: int, level: float, bounds: Bounds) -> tuple[float, float, str]:
    """The interval of ``G`` cluster means all equal to ``mean``: :func:`ragmeter.stats.mean_ci`'s
    rule for equal values, within the range the values' own interval would use (the declared one;
    without it, [0, 1] for 0/1 values, else the values' smallest and largest)."""
    low_b, high_b = _effective_bounds(x[None, :], bounds)
    rng = (float(low_b[0]), float(high_b[0]))
    res = mean_ci_rows(np.full((1, g), mean), level=level, bounds=rng if rng[0] < rng[1] else None)
    return float(res.low[0]), float(res.high[0]), str(res.method[0])
