"""Aggregation statistics: means with confidence intervals that keep their nominal coverage.

The interval of a mean depends on the values (rule in :func:`choose_method`, coverage study in
``benchmarks/intervals.py`` and docs/statistics.md):

- every value is 0 or 1 (exact_match, the correct_* methods, hit_rate ...): the **Clopper-Pearson**
  exact binomial interval. Its coverage is at least the nominal level for every n and p (the
  percentile bootstrap gives the zero-width ``[1, 1]`` for 20 passes out of 20; Clopper-Pearson
  gives ``[0.832, 1]``).
- other values, ``BCA_MIN_N <= n < LARGE_N``: the **BCa** bootstrap (Efron's bias-corrected and accelerated
  percentile interval; same formula as ``scipy.stats.bootstrap(method="BCa")``, computed here with
  the jackknife of the mean in closed form so it is vectorised). Metrics of one run share the
  bootstrap draws (:func:`aggregate_many`).
- other values, ``n >= LARGE_N`` (100,000): **Student's t**. There the mean is as normal as it
  gets: on skewed scores (Beta(0.3, 2), clipped log-normal, 90% zeros) t and BCa differ by 1-2% of
  the interval's width, the size of BCa's own Monte-Carlo error at 2000 resamples, and t costs
  nothing where BCa would draw 2000 x n indices.
- other values, ``n < BCA_MIN_N``: the **studentised (bootstrap-t)** interval. At n = 10-20 on
  skewed scores the percentile and BCa intervals cover only 0.88-0.92 and Student's t 0.92-0.93,
  and BCa still only 0.934-0.94 at n = 50; bootstrap-t, which resamples the t statistic itself,
  stays at about 0.95 (it is wider).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ragmeter.schema import Score

N_BOOTSTRAP = 2000
SEED = 20261122
#: below this many values a non-0/1 mean gets the bootstrap-t interval instead of BCa
BCA_MIN_N = 100

Method = Literal["clopper_pearson", "bca", "bootstrap_t", "t", "constant"]


#: indices drawn per block: a block and its gathered values stay in cache
_BLOCK_ELEMENTS = 1 << 17
#: at or above this many values a non-0/1 mean gets Student's t interval (see :func:`choose_method`)
LARGE_N = 100_000


def _block_sums(cols: np.ndarray, start: int, m: int, seed: int, out: np.ndarray) -> None:
    """Resample sums of every row of ``cols`` (``k x n``) for resamples ``start .. start + m``.

    The indices of a block come from their own PCG64 stream (``SeedSequence(seed, block start)``),
    so blocks can run in any order, on any thread, with the same result. The buffers are made once
    per block and written in place (``out=``), which spares the allocator's page faults."""
    n = cols.shape[1]
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, start])))
    u = np.empty(m * n)
    rng.random(out=u)
    u *= n
    idx = np.empty(m * n, dtype=np.intp)
    np.copyto(idx, u, casting="unsafe")  # floor(u * n): uniform on 0 .. n-1
    g = np.empty(m * n)
    for j in range(cols.shape[0]):
        np.take(cols[j], idx, out=g, mode="clip")  # "raise" would copy the indices first
        out[j, start:start + m] = g.reshape(m, n).sum(axis=1)


def boot_means_many(cols: np.ndarray, n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> np.ndarray:
    """Bootstrap means of several columns of equal length, resampled with the *same* indices.

    Args:
        cols: ``k x n`` values (one row per metric, aligned or not: each row is resampled by
            the same index draws, which is what makes one draw serve every row).
        n_resamples: resamples per row.
        seed: the draws are deterministic for a seed, whatever ``k`` and the thread count.

    Returns:
        ``k x n_resamples`` resample means. The blocks run on two threads (numpy releases the
        GIL while it draws, gathers and sums).
    """
    cols = np.ascontiguousarray(np.atleast_2d(cols), dtype=np.float64)
    k, n = cols.shape
    sums = np.empty((k, n_resamples))
    m = max(1, min(n_resamples, _BLOCK_ELEMENTS // max(n, 1)))
    starts = list(range(0, n_resamples, m))
    if len(starts) > 1 and k * n * n_resamples > 2_000_000:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda a: _block_sums(cols, a, min(m, n_resamples - a), seed, sums), starts))
    else:
        for a in starts:
            _block_sums(cols, a, min(m, n_resamples - a), seed, sums)
    return sums / n


def _boot_means(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` bootstrap resamples of ``x`` (deterministic for a ``seed``)."""
    return boot_means_many(x[None, :], n_resamples, seed)[0]


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
    if x.size >= LARGE_N:
        return "t"
    return "bca" if x.size >= BCA_MIN_N else "bootstrap_t"


def clopper_pearson_ci(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson exact interval of a proportion ``k / n``: Beta quantiles
    ``[B(a/2; k, n-k+1), B(1-a/2; k+1, n-k)]`` (0 and 1 at the ends).

    >>> [round(v, 3) for v in clopper_pearson_ci(20, 20)]
    [0.832, 1.0]
    """
    a = (1 - level) / 2
    lo = beta_quantile(a, k, n - k + 1) if k > 0 else 0.0
    hi = beta_quantile(1 - a, k + 1, n - k) if k < n else 1.0
    return lo, hi


def _betacf(x: float, a: float, b: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function :math:`I_x(a, b)` (the Beta(a, b) CDF), by its
    continued fraction on the side where it converges fast."""
    import math

    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(x, a, b) / a
    return 1.0 - front * _betacf(1.0 - x, b, a) / b


def beta_quantile(p: float, a: float, b: float) -> float:
    """The ``p`` quantile of Beta(a, b) (``scipy.special.betaincinv(a, b, p)``), by bisection of
    :func:`beta_cdf` to the last bit of a double. Plain Python: the interval of a 0/1 metric
    does not load scipy (0.15 s of a command's start)."""
    lo, hi = 0.0, 1.0
    for _ in range(1100):  # halving down to the smallest subnormal gap takes at most ~1075 steps
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if beta_cdf(mid, a, b) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def bca_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_resamples: int = N_BOOTSTRAP,
           seed: int = SEED) -> tuple[float, float] | None:
    """BCa bootstrap interval of the mean (Efron 1987).

    Bias correction :math:`z_0 = \\Phi^{-1}(\\#\\{\\bar x^* < \\bar x\\}/B)`, acceleration from the
    jackknife means :math:`a = \\sum u_i^3 / (6 (\\sum u_i^2)^{3/2})` with
    :math:`u_i = \\bar x_{(\\cdot)} - \\bar x_{(i)}`; the interval is the bootstrap quantiles at
    :math:`\\Phi(z_0 + (z_0 + z_q) / (1 - a (z_0 + z_q)))`. Returns ``None`` below two values.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    return _bca_from_means(x, _boot_means(x, n_resamples, seed), level)


def _bca_from_means(x: np.ndarray, means: np.ndarray, level: float) -> tuple[float, float]:
    from statistics import NormalDist  # the normal CDF and quantile (no scipy import for a summary)

    ndtr, ndtri = NormalDist().cdf, NormalDist().inv_cdf
    n = x.size
    theta = float(x.mean())
    prop = float(np.mean(means < theta))
    z0 = float(ndtri(min(max(prop, 1e-9), 1 - 1e-9)))
    jack = (theta * n - x) / (n - 1)
    u = jack.mean() - jack
    den = 6 * float((u ** 2).sum()) ** 1.5
    acc = float((u ** 3).sum()) / den if den > 0 else 0.0
    qs = []
    for q in ((1 - level) / 2, 1 - (1 - level) / 2):
        zq = ndtri(q)
        qs.append(float(ndtr(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))))
    lo, hi = np.quantile(means, qs)
    return float(lo), float(hi)


def t_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean, ``mean +- t_{n-1} * s / sqrt(n)``; ``None`` below two values."""
    from scipy.special import stdtrit  # Student's t quantile

    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    h = float(stdtrit(n - 1, 1 - (1 - level) / 2)) * float(x.std(ddof=1)) / np.sqrt(n)
    m = float(x.mean())
    return float(m - h), float(m + h)


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
    if method == "t":
        return t_ci(x, level=level)
    return bca_ci(x, level=level, n_resamples=n_resamples, seed=seed)


def aggregate(scores: Sequence[Score]) -> dict[str, Any]:
    """Summary of one metric's scores: mean, std, CI (:func:`mean_ci`, method in ``ci_method``),
    count with a value, count without and why."""
    return aggregate_many({"_": scores})["_"]


def aggregate_many(columns: Mapping[str, Sequence[Score] | tuple[np.ndarray, Sequence[str | None]]],
                   *, level: float = 0.95) -> dict[str, dict[str, Any]]:
    """:func:`aggregate` of several metrics at once; equal to calling it on each, faster: the BCa
    columns of equal length share one set of bootstrap draws (:func:`boot_means_many`).

    A column is a list of :class:`Score`, or ``(values, reasons)``: a float array with NaN where
    there is no value, and the reasons of the missing ones."""
    out: dict[str, dict[str, Any]] = {}
    bca: dict[int, list[tuple[str, np.ndarray]]] = {}
    for key, col in columns.items():
        if isinstance(col, tuple):
            vals_all, why = col
            vals_all = np.asarray(vals_all, dtype=np.float64)
            present = ~np.isnan(vals_all)
            vals = vals_all[present]
            reasons = Counter(r or "no value" for r, p in zip(why, present.tolist(), strict=True) if not p)
        else:
            vals = np.array([s.value for s in col if s.value is not None], dtype=np.float64)
            reasons = Counter(s.reason or "no value" for s in col if s.value is None)
        agg: dict[str, Any] = {"n": int(vals.size), "n_missing": int(sum(reasons.values())),
                               "missing_reasons": dict(reasons.most_common())}
        out[key] = agg
        if not vals.size:
            agg.update(mean=None, std=None, min=None, max=None, ci_low=None, ci_high=None, ci_method=None)
            continue
        agg.update(mean=float(vals.mean()), std=float(vals.std(ddof=1)) if vals.size > 1 else 0.0,
                   min=float(vals.min()), max=float(vals.max()))
        method = choose_method(vals)
        if method == "bca":
            bca.setdefault(vals.size, []).append((key, vals))
            continue
        ci = mean_ci(vals, level=level)
        agg.update(ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
                   ci_method=method if ci else None)
    for group in bca.values():
        means = boot_means_many(np.stack([v for _, v in group]))
        for (key, vals), m in zip(group, means, strict=True):
            lo, hi = _bca_from_means(vals, m, level)
            out[key].update(ci_low=lo, ci_high=hi, ci_method="bca")
    return out


from ragmeter.ppi import classical_mean_ci, ppi_lambda, ppi_mean_ci  # noqa: E402,F401  (PPI: ragmeter/ppi.py)
