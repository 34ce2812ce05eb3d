"""Aggregation statistics: the mean of a metric with a confidence interval that keeps its nominal
coverage at every sample size and never leaves the metric's range.

The interval of a mean (:func:`mean_ci`) depends on the values and on the metric's declared range
``bounds = (low, high)`` (rule in :func:`choose_method`; coverage-and-width study in
``benchmarks/intervals.py`` and docs/statistics.md):

- every value sits at ``low`` or ``high`` (a 0/1 metric such as exact_match, hit_rate, the
  ``correct_*`` methods): the **Clopper-Pearson** exact binomial interval of the share at ``high``,
  mapped onto ``[low, high]``. Its coverage is at least the nominal level for every n and p; 20
  passes out of 20 give ``[0.832, 1]``.
- every value equal to some ``v`` strictly inside the range (``constant``): no value differs from
  ``v``, so the share ``pi`` of the population that does is at most the Clopper-Pearson bound of 0
  out of n, ``1 - (alpha/2)^(1/n)``, and the mean lies within ``[v - pi (v - low), v + pi (high - v)]``
  (the interval Clopper-Pearson gives when ``v`` is a bound; zero width without declared bounds).
- otherwise the **quasi-binomial score interval with a Student-t quantile** (``quasi_score``): with
  the values rescaled to ``y = (x - low) / (high - low)`` in [0, 1], mean ``m``, variance ``s^2``,
  the interval is every ``mu`` with ``(m - mu)^2 <= q^2 * phi * mu * (1 - mu) / n``, where
  ``phi = s^2 / (m (1 - m))`` is the quasi-binomial dispersion (McCullagh & Nelder, *Generalized
  Linear Models*, ch. 9) and ``q`` the Student-t quantile with the Satterthwaite degrees of freedom
  of ``s^2``, ``nu = 2n(n-1) / ((k-1)(n-1) + 2)`` (``k`` the sample kurtosis; ``nu = n - 1`` for
  normal data, fewer when a few values carry the spread), rounded down, between 1 and ``n - 1``.
  It is Wilson's score interval with the binomial variance replaced by the observed one: inside
  the range by construction, containing the mean strictly, narrowing toward the bound a mean is
  close to, and equal to Student's t interval when the values sit far from both bounds.

Without ``bounds`` (or with ``(-inf, inf)``: a metric that declares no range), 0/1 values are
bounded by [0, 1] and any other values by the smallest and largest value observed. The interval
is a closed form: deterministic, no resampling, O(n).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from ragmeter.core.reasons import summarise as summarise_reasons
from ragmeter.core.schema import Score

N_BOOTSTRAP = 2000
SEED = 20261122

Method = Literal["clopper_pearson", "quasi_score", "constant"]
Bounds = tuple[float, float] | Sequence[float] | None

#: indices drawn per block: a block and its gathered values stay in cache
_BLOCK_ELEMENTS = 1 << 17


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


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (``0.5 < p < 1``) of Student's t with ``df`` degrees of freedom
    (``scipy.special.stdtrit(df, p)`` to about 1e-12): ``T^2 / (df + T^2)`` is Beta(1/2, df/2), so
    ``t = sqrt(df * y / (1 - y))`` with ``y`` its ``2p - 1`` quantile (:func:`beta_quantile`)."""
    if not 0.5 < p < 1 or not df > 0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df > 0, got p={p}, df={df}")
    y = beta_quantile(2 * p - 1, 0.5, df / 2)
    return math.sqrt(df * y / (1 - y))


@lru_cache(maxsize=4096)
def _clopper_pearson_cached(k: int, n: int, level: float) -> tuple[float, float]:
    return clopper_pearson_ci(k, n, level=level)


def _check_bounds(bounds: Bounds) -> tuple[float, float]:
    try:
        low, high = (float(b) for b in bounds)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bounds must be a pair (low, high) of numbers, got {bounds!r}") from exc
    if math.isnan(low) or math.isnan(high) or not low < high:
        raise ValueError(f"bounds must satisfy low < high, got {bounds!r}")
    return low, high


def difference_bounds(bounds: Bounds) -> tuple[float, float] | None:
    """The range of the difference of two values of a metric on ``[low, high]``:
    ``[low - high, high - low]`` (``[-1, 1]`` for a 0-1 metric); ``None`` stays ``None``."""
    if bounds is None:
        return None
    low, high = _check_bounds(bounds)
    return low - high, high - low


@dataclass(frozen=True)
class Intervals:
    """The intervals of the means of the rows of a matrix (:func:`mean_ci_rows`): per row ``low``,
    ``high`` (NaN where no interval is defined), ``mean`` and ``method`` (``""`` where none)."""

    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray
    method: np.ndarray


def _effective_bounds(x: np.ndarray, bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the range the interval stays in: the declared one, widened to the values (a metric
    that breaks its own range must not get an interval that excludes its mean), an infinite side
    replaced by the observed extreme; without ``bounds`` (or with both sides infinite: a metric
    that declares no range), [0, 1] for 0/1 rows, else ``[min, max]``."""
    xmin, xmax = x.min(axis=1), x.max(axis=1)
    low, high = _check_bounds(bounds) if bounds is not None else (-math.inf, math.inf)
    if math.isinf(low) and math.isinf(high):
        binary = np.all((x == 0.0) | (x == 1.0), axis=1)
        return np.where(binary, 0.0, xmin), np.where(binary, 1.0, xmax)
    lo = np.minimum(xmin, low) if math.isfinite(low) else xmin
    hi = np.maximum(xmax, high) if math.isfinite(high) else xmax
    return lo, hi


def _quasi_score(y: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The quasi-binomial score interval (module docstring) of the mean of each row of ``y``: rows
    of values in [0, 1] that vary; the interval on the same 0-1 scale."""
    n = y.shape[1]
    m = y.mean(axis=1)
    # moments of the deviations scaled by their largest size: no underflow for tiny spreads
    z = y - m[:, None]
    scale = np.abs(z).max(axis=1)
    z /= np.where(scale > 0, scale, 1.0)[:, None]
    z *= z
    m2 = z.mean(axis=1)  # >= 1/n where scale > 0
    z *= z
    kurt = np.where(scale > 0, z.mean(axis=1) / np.where(scale > 0, m2 * m2, 1.0), 3.0)
    return quasi_score_from_moments(n, m, scale, m2, kurt, level)


def quasi_score_from_moments(n: int, m: np.ndarray, scale: np.ndarray, m2: np.ndarray, kurt: np.ndarray,
                             level: float) -> tuple[np.ndarray, np.ndarray]:
    """The quasi-binomial score interval (module docstring) from the moments of values on the 0-1
    scale: per row the mean ``m``, the second central moment ``scale^2 * m2`` (``scale`` keeps
    ``m2`` away from underflow) and the kurtosis ``kurt``; ``n`` values a row."""
    nu = np.floor(np.clip(2.0 * n * (n - 1) / ((kurt - 1.0) * (n - 1) + 2.0), 1.0, n - 1.0))
    p = 1 - (1 - level) / 2
    uniq, inv = np.unique(nu, return_inverse=True)
    q = np.array([t_quantile(p, float(v)) for v in uniq])[inv.ravel()]
    # q^2 phi / n, phi = s^2 / (m (1 - m)) the quasi-binomial dispersion
    den = m * (1 - m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi = np.where(den > 0, scale * (scale / np.where(den > 0, den, 1.0)) * m2 * (n / (n - 1)), 0.0)
    c = q * q * phi / n
    r = np.sqrt(c * c + 4.0 * c * m * (1 - m))
    # the roots of (1 + c) mu^2 - (2m + c) mu + m^2 = 0, each written where it does not cancel:
    # their product is m^2 / (1 + c), and (1 - m)^2 / (1 + c) for 1 - mu
    d_lo, d_hi = 2 * m + c + r, 2 * (1 - m) + c + r
    low = np.where(d_lo > 0, 2 * m * m / np.where(d_lo > 0, d_lo, 1.0), m)
    high = np.where(d_hi > 0, 1.0 - 2 * (1 - m) ** 2 / np.where(d_hi > 0, d_hi, 1.0), m)
    return low, high


def mean_ci_rows(x: np.ndarray, *, level: float = 0.95, bounds: Bounds = None) -> Intervals:
    """:func:`mean_ci` of every row of a 2-D array at once (vectorised: the coverage study calls it
    on thousands of simulated data sets)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"mean_ci_rows needs a 2-D array, got {x.ndim} dimension(s)")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rows, n = x.shape
    if n == 0:
        return Intervals(np.full(rows, np.nan), np.full(rows, np.nan), np.full(rows, np.nan),
                         np.full(rows, "", dtype=object))
    if not np.all(np.isfinite(x)):
        raise ValueError("mean_ci needs finite values (leave the values without a result out)")
    low_b, high_b = _effective_bounds(x, bounds)
    span = high_b - low_b
    at_bounds = (span > 0) & np.all((x == low_b[:, None]) | (x == high_b[:, None]), axis=1)
    vary = x.min(axis=1) < x.max(axis=1)
    return interval_rows(n, x.mean(axis=1), low_b, high_b, at_bounds, vary, level,
                         lambda i: int(np.count_nonzero(x[i] == high_b[i])),
                         lambda rest: _quasi_score((x[rest] - low_b[rest, None]) / span[rest, None], level))


def interval_rows(n: int, mean: np.ndarray, low_b: np.ndarray, high_b: np.ndarray, at_bounds: np.ndarray,
                  vary: np.ndarray, level: float, count_high: Any, quasi: Any) -> Intervals:
    """The intervals (module docstring) of rows of ``n`` values from what they need: each row's
    mean, effective range ``[low_b, high_b]`` (:func:`_effective_bounds`), whether every value is at
    a bound of it (``at_bounds``), whether the values vary; ``count_high(i)``, the number of values
    of row ``i`` at ``high_b``; ``quasi(rows)``, the quasi-score interval on the 0-1 scale of the rows
    of a mask. :func:`mean_ci_rows` gives them from the values, :class:`Moments`
    from running sums."""
    rows = len(mean)
    lo, hi = np.full(rows, np.nan), np.full(rows, np.nan)
    method = np.full(rows, "", dtype=object)
    span = high_b - low_b
    for i in np.flatnonzero(at_bounds):
        k = count_high(i)
        cp_lo, cp_hi = _clopper_pearson_cached(k, n, level)
        lo[i] = low_b[i] + span[i] * cp_lo if k > 0 else low_b[i]
        hi[i] = low_b[i] + span[i] * cp_hi if k < n else high_b[i]
    method[at_bounds] = "clopper_pearson"
    if n >= 2:
        constant = ~at_bounds & ~vary
        # no value differs from v: the share of the population that does is below the
        # Clopper-Pearson bound of 0 out of n, and the mean moves at most that share of the way
        # from v to either bound (zero width when the range is the observed one)
        share = _clopper_pearson_cached(0, n, level)[1]
        lo[constant] = mean[constant] - share * (mean[constant] - low_b[constant])
        hi[constant] = mean[constant] + share * (high_b[constant] - mean[constant])
        method[constant] = "constant"
        rest = ~at_bounds & vary
        if rest.any():
            ylo, yhi = quasi(rest)
            lo[rest] = low_b[rest] + span[rest] * ylo
            hi[rest] = low_b[rest] + span[rest] * yhi
            method[rest] = "quasi_score"
    # the guarantees, whatever the rounding: inside the range, around the mean, strictly around it
    # when the values vary (and the mean is not at a bound)
    mean = np.clip(mean, low_b, high_b)
    lo = np.minimum(np.clip(lo, low_b, high_b), mean)
    hi = np.maximum(np.clip(hi, low_b, high_b), mean)
    nudge_lo = vary & (lo >= mean) & (mean > low_b)
    lo[nudge_lo] = np.maximum(np.nextafter(mean[nudge_lo], -np.inf), low_b[nudge_lo])
    nudge_hi = vary & (hi <= mean) & (mean < high_b)
    hi[nudge_hi] = np.minimum(np.nextafter(mean[nudge_hi], np.inf), high_b[nudge_hi])
    return Intervals(lo, hi, mean, method)


def mean_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95,
            bounds: Bounds = None) -> tuple[float, float] | None:
    """Confidence interval of the mean of ``values`` (method: :func:`choose_method`): the interval a
    run's summary gives them (:func:`aggregate_many`, from :class:`~Moments`).

    Args:
        values: finite numbers (leave the values without a result out).
        level: the confidence level.
        bounds: ``(low, high)``, the range the metric's values can take (its registry ``range``;
            a side may be infinite). ``None`` or both sides infinite: [0, 1] for 0/1 values, else
            the smallest and the largest value observed.

    Returns:
        ``(low, high)`` inside the range with ``low <= mean <= high``, strictly when the values vary
        (and the mean is not at a bound); ``None`` for no value, or one value not at a bound (a value
        at a bound gets Clopper-Pearson, which is defined from one value on).

    >>> [round(v, 3) for v in mean_ci([1.0] * 20, bounds=(0, 1))]
    [0.832, 1.0]
    >>> [round(v, 3) for v in mean_ci([0.2, 0.4, 0.9, 0.95, 1, 1, 1, 1, 1, 1], bounds=(0, 1))]
    [0.544, 0.961]
    """
    agg = _moments_of(values).summary(level=level, bounds=bounds)
    if agg["ci_method"] is None:
        return None
    return agg["ci_low"], agg["ci_high"]


def choose_method(values: Sequence[float] | np.ndarray, *, bounds: Bounds = None) -> Method | None:
    """The interval method :func:`mean_ci` uses for these values (module docstring): one of
    ``clopper_pearson``, ``constant``, ``quasi_score``; ``None`` when no interval is defined."""
    return _moments_of(values).summary(bounds=bounds)["ci_method"]


def _moments_of(values: Sequence[float] | np.ndarray) -> Any:
    """A :class:`Moments` fed ``values``, which must all be finite."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(x)):
        raise ValueError("mean_ci needs finite values (leave the values without a result out)")
    acc = Moments()
    acc.add(x)
    return acc


# ---- a run's summary from running sums ------------------------------------------------------------
# Moments is the one accumulator of a run's summary, whether the run holds its values (aggregate_many
# feeds it the whole column) or streams them (ragmeter.run.stream feeds it each chunk): its state after
# the values does not depend on how they were cut into chunks, so both give the same summary, bit for
# bit. Every sum is exact (exact_sum); counts, the smallest and largest value and the counts at them are
# exact too. The interval is the closed form above (interval_rows) from these figures.


#: every double is an integer times 2^-1126 (the smallest subnormal, 2^-1074, is 2^52 of them): an
#: exact sum of doubles is kept as that integer
_SUM_EXP = 1126
_TWO53, _TWO27 = 2.0**53, 2.0**27


def exact_sum(values: np.ndarray) -> int:
    """The exact sum of float64 ``values``, times 2^1126: an integer, so adding the sums of two
    chunks gives the sum of both exactly, whatever the chunks.

    Each value ``x = m * 2^e`` (``np.frexp``) has an integer mantissa ``M = m * 2^53`` (``|M| < 2^53``),
    split into ``hi * 2^27 + lo``; the halves are summed per exponent by ``np.bincount`` in float64,
    exact because every partial sum is an integer below 2^53 (at most 2^24 values at a time), and
    the few sums per exponent are then shifted and added as Python integers.

    >>> exact_sum(np.full(10, 0.1)) / 2**1126 == 1.0, exact_sum(np.full(10, 0.1)) > 2**1126
    (True, True)
    """
    total = 0
    for a in range(0, len(values), 1 << 24):
        m, e = np.frexp(values[a:a + (1 << 24)])
        if not len(e):
            continue
        big = m * _TWO53
        hi = np.floor(big / _TWO27)
        lo = big - hi * _TWO27
        e_min = int(e.min())
        at = e - e_min
        his, los = np.bincount(at, weights=hi), np.bincount(at, weights=lo)
        for j in np.flatnonzero((his != 0) | (los != 0)).tolist():
            shift = e_min + j - 53 + _SUM_EXP
            total += (int(his[j]) << (shift + 27)) + (int(los[j]) << shift)
    return total


class Moments:
    """Running sufficient statistics of one metric's values (missing ones as NaN, with their reasons).

    Kept: the counts with and without a value, the reasons of the missing ones, the smallest and
    largest value with how many values equal each, the count of 0s and 1s (a 0/1 metric's
    interval), and exact sums of the values and of the powers 1 to 4 of their deviations from
    the first value (``d = (x - x0) * 2^-e``, ``2^e`` the size of the first deviation that is not 0:
    shifted and scaled so squares neither cancel nor underflow). Each value goes through the same
    elementwise operations whichever chunk it arrives in.
    """

    def __init__(self) -> None:
        self.n = 0
        self.reasons: Counter[str] = Counter()
        self.min = self.max = math.nan
        self.n_min = self.n_max = self.n_zero = self.n_one = 0
        self.finite = True
        self._shift: float | None = None
        self._scale: float | None = None  # 2^-e
        self._scale_exp = 0
        # exact sums (exact_sum: integers, times 2^1126) of x, d, d^2, d^3, d^4
        self._sums = [0, 0, 0, 0, 0]

    def add(self, values: np.ndarray, reasons: Sequence[str | None] | None = None) -> None:
        """Add a chunk: ``values`` (NaN: no value) and, aligned with them, the no-value reasons
        (``None`` or a ``None`` entry: "no value")."""
        values = np.asarray(values, dtype=np.float64)
        present = ~np.isnan(values)
        n_present = int(np.count_nonzero(present))
        if n_present < len(values):
            missing = np.flatnonzero(~present).tolist()
            if reasons is None:
                self.reasons["no value"] += len(missing)
            else:
                self.reasons.update(reasons[i] or "no value" for i in missing)
        if not n_present:
            return
        x = values if n_present == len(values) else values[present]
        if not np.all(np.isfinite(x)):
            self.finite = False
            return
        self.n += n_present
        lo, hi = float(x.min()), float(x.max())
        if self.n == n_present or lo < self.min:
            self.min, self.n_min = lo, 0
        if lo == self.min:
            self.n_min += int(np.count_nonzero(x == lo))
        if self.n == n_present or hi > self.max:
            self.max, self.n_max = hi, 0
        if hi == self.max:
            self.n_max += int(np.count_nonzero(x == hi))
        self.n_zero += int(np.count_nonzero(x == 0.0))
        self.n_one += int(np.count_nonzero(x == 1.0))
        if self._shift is None:
            self._shift = float(x[0])
        d = x - self._shift
        if self._scale is None:
            nonzero = np.flatnonzero(d)
            if not nonzero.size:  # every value so far equals the first: every power sums to 0
                self._add_sum(0, x)
                return
            self._scale_exp = min(max(math.frexp(abs(float(d[nonzero[0]])))[1], -1000), 1000)
            self._scale = math.ldexp(1.0, -self._scale_exp)
        d *= self._scale
        d2 = d * d
        self._add_sum(0, x)
        self._add_sum(1, d)
        self._add_sum(2, d2)
        self._add_sum(3, d2 * d)
        self._add_sum(4, d2 * d2)

    def _add_sum(self, k: int, xs: np.ndarray) -> None:
        self._sums[k] += exact_sum(xs)

    def _exact(self, k: int) -> Fraction:
        return Fraction(self._sums[k], 1 << _SUM_EXP)

    def _central(self) -> tuple[float, float]:
        """The second and fourth central moments of the deviations ``d``, computed exactly from
        the exact sums and rounded once."""
        n = self.n
        t1, t2, t3, t4 = (self._exact(k) for k in (1, 2, 3, 4))
        mu = t1 / n
        m2 = _to_float((t2 - t1 * mu) / n)
        m4 = _to_float((t4 - 4 * mu * t3 + 6 * mu * mu * t2 - 3 * mu * mu * mu * t1) / n)
        return max(m2, 0.0), m4

    def mean(self) -> float:
        """The mean: the exact sum over the count, rounded once."""
        if self.min == self.max:
            return self.min + 0.0
        return min(max(_to_float(self._exact(0) / self.n), self.min), self.max)

    def summary(self, *, level: float = 0.95, bounds: Bounds = None) -> dict[str, Any]:
        """What :func:`~ragmeter.stats.intervals.aggregate` reports: ``n``, ``n_missing``,
        ``missing_reasons``, ``mean``, ``std``, ``min``, ``max``, ``ci_low``, ``ci_high``, ``ci_method``."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        if not self.finite:
            raise ValueError("mean_ci needs finite values (leave the values without a result out)")
        n = self.n
        agg: dict[str, Any] = {"n": n, "n_missing": int(sum(self.reasons.values())),
                               "missing_reasons": summarise_reasons(self.reasons)}
        if not n:
            agg.update(mean=None, std=None, min=None, max=None, ci_low=None, ci_high=None, ci_method=None)
            return agg
        lo_v, hi_v = self.min + 0.0, self.max + 0.0  # + 0.0: a -0.0 reads as 0.0 whichever came first
        mean = self.mean()
        m2, m4 = self._central() if lo_v < hi_v else (0.0, math.nan)
        std = math.ldexp(math.sqrt(m2 * n / (n - 1)), self._scale_exp) if n > 1 and lo_v < hi_v else 0.0
        low_b, high_b = self._effective_bounds(bounds)
        span = high_b - low_b
        k_low = self.n_min if lo_v == low_b else 0
        k_high = self.n_max if hi_v == high_b else 0
        at_bounds = span > 0 and k_low + k_high == n
        vary = lo_v < hi_v

        def quasi(_rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            m = (mean - low_b) / span
            # the deviations' second moment on the 0-1 scale is (2^e / span)^2 * m2
            kurt = m4 / (m2 * m2) if m2 > 0 and math.isfinite(m4) else 3.0
            return quasi_score_from_moments(n, np.array([m]), np.array([math.ldexp(1.0, self._scale_exp) / span]),
                                            np.array([m2]), np.array([max(kurt, 1.0)]), level)

        res = interval_rows(n, np.array([mean]), np.array([low_b]), np.array([high_b]), np.array([at_bounds]),
                            np.array([vary]), level, lambda _i: k_high, quasi)
        method = res.method[0] or None
        agg.update(mean=mean, std=std, min=lo_v, max=hi_v,
                   ci_low=min(float(res.low[0]), mean) if method else None,
                   ci_high=max(float(res.high[0]), mean) if method else None, ci_method=method)
        return agg

    def _effective_bounds(self, bounds: Bounds) -> tuple[float, float]:
        """:func:`_effective_bounds` from the running figures."""
        low, high = _check_bounds(bounds) if bounds is not None else (-math.inf, math.inf)
        if math.isinf(low) and math.isinf(high):
            if self.n_zero + self.n_one == self.n:
                return 0.0, 1.0
            return self.min + 0.0, self.max + 0.0
        lo = min(self.min, low) if math.isfinite(low) else self.min
        hi = max(self.max, high) if math.isfinite(high) else self.max
        return lo + 0.0, hi + 0.0


def _to_float(q: Fraction) -> float:
    """``q`` rounded to the nearest double (NaN past the largest one)."""
    try:
        return float(q)
    except OverflowError:
        return math.nan


def aggregate(scores: Sequence[Score], *, level: float = 0.95, bounds: Bounds = None) -> dict[str, Any]:
    """Summary of one metric's scores: mean, std, min, max, the CI of the mean (:func:`mean_ci`
    within ``bounds``, the metric's range; its method in ``ci_method``), the count with a value and
    the count without, with why."""
    return aggregate_many({"_": scores}, level=level, bounds={"_": bounds})["_"]


def aggregate_many(columns: Mapping[str, Any], *, level: float = 0.95, bounds: Mapping[str, Bounds] | None = None
                   ) -> dict[str, dict[str, Any]]:
    """:func:`aggregate` of several metrics.

    A column is a list of :class:`Score`; or ``(values, reasons)``: a float array with NaN where
    there is no value, and the reasons of the missing ones; or a :class:`~Moments`
    already fed the values (a streamed run's). Every column is summarised by a ``Moments`` (the
    same figures whatever the column's form). ``bounds`` maps a column to its metric's range (the
    registry's ``range``); a column without one gets :func:`mean_ci`'s rule for no bounds.
    ``missing_reasons`` counts the reasons (:func:`ragmeter.core.reasons.summarise`: the rarer
    precise texts of one category counted on one line)."""
    out: dict[str, dict[str, Any]] = {}
    for key, col in columns.items():
        if isinstance(col, Moments):
            acc = col
        else:
            acc = Moments()
            if isinstance(col, tuple):
                acc.add(np.asarray(col[0], dtype=np.float64), col[1])
            else:
                acc.add(np.array([np.nan if s.value is None else s.value for s in col], dtype=np.float64),
                        [s.reason for s in col])
        out[key] = acc.summary(level=level, bounds=(bounds or {}).get(key))
    return out
