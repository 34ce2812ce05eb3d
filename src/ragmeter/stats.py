"""Aggregation statistics: means with confidence intervals that keep their nominal coverage.

The interval of a mean depends on the values (rule in :func:`choose_method`, coverage study in
``benchmarks/intervals.py`` and docs/statistics.md):

- every value is 0 or 1 (exact_match, the correct_* methods, hit_rate ...): the **Clopper-Pearson**
  exact binomial interval. Its coverage is at least the nominal level for every n and p (the
  percentile bootstrap gives the zero-width ``[1, 1]`` for 20 passes out of 20; Clopper-Pearson
  gives ``[0.832, 1]``).
- other values, ``n >= BCA_MIN_N``: the **BCa** bootstrap (Efron's bias-corrected and accelerated
  percentile interval; same formula as ``scipy.stats.bootstrap(method="BCa")``, computed here with
  the jackknife of the mean in closed form so it is vectorised).
- other values, ``n < BCA_MIN_N``: the **studentised (bootstrap-t)** interval. At n = 10-20 on
  skewed scores the percentile and BCa intervals cover only 0.88-0.92 and Student's t 0.92-0.93,
  and BCa still only 0.934-0.94 at n = 50; bootstrap-t, which resamples the t statistic itself,
  stays at about 0.95 (it is wider).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ragmeter.schema import Score

N_BOOTSTRAP = 2000
SEED = 20261122
#: below this many values a non-0/1 mean gets the bootstrap-t interval instead of BCa
BCA_MIN_N = 100

Method = Literal["clopper_pearson", "bca", "bootstrap_t", "constant"]


def _boot_means(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    n = x.size
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    block = max(1, min(n_resamples, 2_000_000 // n))
    for i in range(0, n_resamples, block):
        m = min(block, n_resamples - i)
        idx = rng.integers(0, n, size=(m, n))
        means[i:i + m] = x[idx].mean(axis=1)
    return means


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95,
                 n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean.

    Kept for callers that want the plain percentile interval; means in runs and reports use
    :func:`mean_ci`. Returns ``None`` for fewer than two values. Deterministic for a given ``seed``.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    means = _boot_means(x, n_resamples, seed)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def is_binary(values: Sequence[float] | np.ndarray) -> bool:
    """Whether every value is exactly 0 or 1 (a pass/fail metric)."""
    x = np.asarray(values, dtype=np.float64)
    return bool(x.size) and bool(np.all((x == 0) | (x == 1)))


def choose_method(values: Sequence[float] | np.ndarray) -> Method:
    """The interval method :func:`mean_ci` uses for these values (see the module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    if is_binary(x):
        return "clopper_pearson"
    if x.size and np.all(x == x[0]):
        return "constant"
    return "bca" if x.size >= BCA_MIN_N else "bootstrap_t"


def clopper_pearson_ci(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson exact interval of a proportion ``k / n``: Beta quantiles
    ``[B(a/2; k, n-k+1), B(1-a/2; k+1, n-k)]`` (0 and 1 at the ends).

    >>> [round(v, 3) for v in clopper_pearson_ci(20, 20)]
    [0.832, 1.0]
    """
    from scipy.stats import beta

    a = (1 - level) / 2
    lo = float(beta.ppf(a, k, n - k + 1)) if k > 0 else 0.0
    hi = float(beta.ppf(1 - a, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def bca_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_resamples: int = N_BOOTSTRAP,
           seed: int = SEED) -> tuple[float, float] | None:
    """BCa bootstrap interval of the mean (Efron 1987).

    Bias correction :math:`z_0 = \\Phi^{-1}(\\#\\{\\bar x^* < \\bar x\\}/B)`, acceleration from the
    jackknife means :math:`a = \\sum u_i^3 / (6 (\\sum u_i^2)^{3/2})` with
    :math:`u_i = \\bar x_{(\\cdot)} - \\bar x_{(i)}`; the interval is the bootstrap quantiles at
    :math:`\\Phi(z_0 + (z_0 + z_q) / (1 - a (z_0 + z_q)))`. Returns ``None`` below two values.
    """
    from scipy.stats import norm

    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    means = _boot_means(x, n_resamples, seed)
    theta = float(x.mean())
    prop = float(np.mean(means < theta))
    z0 = float(norm.ppf(min(max(prop, 1e-9), 1 - 1e-9)))
    jack = (theta * n - x) / (n - 1)
    u = jack.mean() - jack
    den = 6 * float((u ** 2).sum()) ** 1.5
    acc = float((u ** 3).sum()) / den if den > 0 else 0.0
    qs = []
    for q in ((1 - level) / 2, 1 - (1 - level) / 2):
        zq = norm.ppf(q)
        qs.append(float(norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))))
    lo, hi = np.quantile(means, qs)
    return float(lo), float(hi)


def t_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean, ``mean +- t_{n-1} * s / sqrt(n)``; ``None`` below two values."""
    from scipy.stats import t

    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    h = float(t.ppf(1 - (1 - level) / 2, n - 1)) * float(x.std(ddof=1)) / np.sqrt(n)
    m = float(x.mean())
    return m - h, m + h


def bootstrap_t_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95,
                   n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> tuple[float, float] | None:
    r"""Studentised (bootstrap-t) interval of the mean: the quantiles of
    :math:`t^* = (\bar x^* - \bar x) / (s^* / \sqrt n)` over resamples replace Student's t quantiles,
    :math:`[\bar x - t^*_{1-a/2} s/\sqrt n,\ \bar x - t^*_{a/2} s/\sqrt n]`. Resamples whose values
    are all equal (``s* = 0``) are left out. ``None`` below two values.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    s0 = float(x.std(ddof=1))
    m0 = float(x.mean())
    if s0 == 0:
        return m0, m0
    rng = np.random.default_rng(seed)
    ts = np.empty(n_resamples)
    block = max(1, min(n_resamples, 2_000_000 // n))
    for i in range(0, n_resamples, block):
        m = min(block, n_resamples - i)
        xs = x[rng.integers(0, n, size=(m, n))]
        sd = xs.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ts[i:i + m] = np.where(sd > 0, (xs.mean(axis=1) - m0) / sd * np.sqrt(n), np.nan)
    a = (1 - level) / 2
    q_hi, q_lo = np.nanquantile(ts, [1 - a, a])
    h = s0 / np.sqrt(n)
    return m0 - float(q_hi) * h, m0 - float(q_lo) * h


def mean_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95,
            n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> tuple[float, float] | None:
    """Confidence interval of the mean with the method of :func:`choose_method`.

    0/1 values: Clopper-Pearson (defined from one value on); otherwise ``None`` below two values,
    a zero-width interval when every value is equal, bootstrap-t below :data:`BCA_MIN_N` values,
    BCa above. Deterministic for a given ``seed``.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    method = choose_method(x)
    if method == "clopper_pearson":
        return clopper_pearson_ci(int(x.sum()), int(x.size), level=level)
    if x.size < 2:
        return None
    if method == "constant":
        return float(x[0]), float(x[0])
    if method == "bootstrap_t":
        return bootstrap_t_ci(x, level=level, n_resamples=n_resamples, seed=seed)
    return bca_ci(x, level=level, n_resamples=n_resamples, seed=seed)


def aggregate(scores: Sequence[Score]) -> dict[str, Any]:
    """Summary of one metric's scores: mean, std, CI (:func:`mean_ci`, method in ``ci_method``),
    count with a value, count without and why."""
    vals = np.array([s.value for s in scores if s.value is not None], dtype=np.float64)
    reasons = Counter(s.reason or "no value" for s in scores if s.value is None)
    out: dict[str, Any] = {
        "n": int(vals.size),
        "n_missing": int(sum(reasons.values())),
        "missing_reasons": dict(reasons.most_common()),
    }
    if vals.size:
        ci = mean_ci(vals)
        out.update(mean=float(vals.mean()), std=float(vals.std(ddof=1)) if vals.size > 1 else 0.0,
                   min=float(vals.min()), max=float(vals.max()),
                   ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
                   ci_method=choose_method(vals) if ci else None)
    else:
        out.update(mean=None, std=None, min=None, max=None, ci_low=None, ci_high=None, ci_method=None)
    return out
