"""Aggregation statistics: means with bootstrap confidence intervals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmeter.schema import Score

N_BOOTSTRAP = 2000
SEED = 20261122


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95,
                 n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean.

    Returns ``None`` for fewer than two values (an interval is not defined). Deterministic for a
    given ``seed``. Resamples are drawn in blocks so memory stays bounded for large inputs.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    block = max(1, min(n_resamples, 2_000_000 // n))
    for i in range(0, n_resamples, block):
        m = min(block, n_resamples - i)
        idx = rng.integers(0, n, size=(m, n))
        means[i:i + m] = x[idx].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def aggregate(scores: Sequence[Score]) -> dict[str, Any]:
    """Summary of one metric's scores: mean, std, CI, count with a value, count without and why."""
    vals = np.array([s.value for s in scores if s.value is not None], dtype=np.float64)
    reasons = Counter(s.reason or "no value" for s in scores if s.value is None)
    out: dict[str, Any] = {
        "n": int(vals.size),
        "n_missing": int(sum(reasons.values())),
        "missing_reasons": dict(reasons.most_common()),
    }
    if vals.size:
        ci = bootstrap_ci(vals)
        out.update(mean=float(vals.mean()), std=float(vals.std(ddof=1)) if vals.size > 1 else 0.0,
                   min=float(vals.min()), max=float(vals.max()),
                   ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None)
    else:
        out.update(mean=None, std=None, min=None, max=None, ci_low=None, ci_high=None)
    return out
