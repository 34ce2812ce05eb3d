"""Paired statistics for comparing two runs on the same samples: CI of the mean difference
(:func:`paired_mean_ci`, within the range a difference can take), sign-flip permutation test, Wilcoxon signed-rank, Holm correction, sample size;
and the same interval and test for pairs that come in clusters (the turns of a conversation:
:func:`cluster_paired_mean_ci`, :func:`cluster_permutation_test`).

Every function takes two aligned arrays ``a`` (the reference: run A, or the baseline) and ``b``
(the challenger: run B, or the current run); differences are ``d = b - a``, so a positive mean
difference means ``b`` scored higher.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.stats.intervals import SEED, Bounds, bootstrap_ci, difference_bounds, mean_ci

Alternative = Literal["two-sided", "less", "greater"]
ArrayLike = Sequence[float] | np.ndarray

#: exact enumeration of all sign flips up to this many non-zero differences (2**20 ≈ 1e6 flips)
EXACT_MAX_NONZERO = 20
N_PERMUTATIONS = 10_000


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise MetricError(f"paired samples must have the same length, got {x.size} and {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise MetricError("paired samples must be finite (drop samples without a value first)")
    return x, y


def _check_alternative(alternative: str) -> None:
    if alternative not in ("two-sided", "less", "greater"):
        raise MetricError(f"alternative must be 'two-sided', 'less' or 'greater', got {alternative!r}")


def paired_bootstrap_ci(a: ArrayLike, b: ArrayLike, *, level: float = 0.95,
                        n_resamples: int = 2000, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean paired difference ``mean(b - a)``.

    Resamples *pairs* (sample indices) with replacement, so the correlation between the two runs is
    kept: the interval is usually much narrower than one built from two independent intervals.

    .. math::  d_i = b_i - a_i,\\quad \\bar d^{*(r)} = \\frac1n \\sum_i d_{I^{(r)}_i},\\quad
               CI = [q_{\\alpha/2}(\\bar d^*),\\ q_{1-\\alpha/2}(\\bar d^*)]

    Returns:
        ``(low, high)``, or ``None`` for fewer than two pairs. When every difference is equal the
        interval is that value (zero width).

    Example:
        >>> paired_bootstrap_ci([0, 0, 1, 1], [1, 1, 1, 1])  # doctest: +SKIP
        (0.0, 1.0)
    """
    x, y = _pair(a, b)
    if not 0 < level < 1:
        raise MetricError(f"level must be in (0, 1), got {level}")
    return bootstrap_ci(y - x, level=level, n_resamples=n_resamples, seed=seed)


def paired_mean_ci(a: ArrayLike, b: ArrayLike, *, level: float = 0.95,
                   bounds: Bounds = None, clusters: Sequence[str] | None = None) -> tuple[float, float] | None:
    """Confidence interval of the mean paired difference ``mean(b - a)``: the interval of
    :func:`ragmeter.stats.mean_ci` of the per-sample differences ``d_i = b_i - a_i``, which lie in
    ``[low - high, high - low]`` for a metric on ``bounds = (low, high)`` (``[-1, 1]`` for a 0-1
    metric; :func:`ragmeter.stats.difference_bounds`). Paired: the correlation between the runs is
    kept, so the interval is usually much narrower than one built from two separate intervals.

    The one interval of a paired difference: ``compare``, ``gate``, the report and the dashboard
    call it. With ``clusters`` (one label per pair: the conversation of each turn) it is
    :func:`cluster_paired_mean_ci`. Differences that are all equal get the same interval on every
    path: all 0 gives ``[-pi, pi]`` with ``pi = 1 - (alpha/2)^(1/n)`` on ``[-1, 1]``, ``n`` the
    pairs, or the clusters when the pairs are clustered (docs/statistics.md).

    Returns:
        ``(low, high)`` inside the difference's range, around the mean difference (strictly when the
        differences vary); ``None`` for fewer than two pairs (two clusters when clustered).

    Example:
        >>> [round(v, 3) for v in paired_mean_ci([0, 0, 1, 1] * 5, [1, 1, 1, 1] * 5, bounds=(0, 1))]
        [0.23, 0.698]
    """
    if clusters is not None:
        return cluster_paired_mean_ci(a, b, clusters, level=level, bounds=bounds)
    x, y = _pair(a, b)
    if not 0 < level < 1:
        raise MetricError(f"level must be in (0, 1), got {level}")
    if x.size < 2:
        return None
    return mean_ci(y - x, level=level, bounds=difference_bounds(value_bounds(x, y, bounds)))


def value_bounds(x: np.ndarray, y: np.ndarray, bounds: Bounds) -> Bounds:
    """The range the values of both runs lie in: ``bounds``, the metric's declared range; for a
    metric that declares none (``None``, or both sides infinite) the rule for no declared range on
    the values of both runs, [0, 1] when they are all 0 or 1, else their smallest and largest
    (``None`` when they are all equal), so the differences of a 0/1 metric lie in [-1, 1]."""
    if bounds is not None and not all(math.isinf(float(b)) for b in bounds):
        return bounds
    v = np.concatenate([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)])
    if v.size and np.all((v == 0.0) | (v == 1.0)):
        return 0.0, 1.0
    return (float(v.min()), float(v.max())) if v.size and v.min() < v.max() else None


@dataclass(frozen=True)
class PermutationResult:
    """Outcome of :func:`paired_permutation_test`.

    Attributes:
        statistic: the observed mean difference ``mean(b - a)``.
        pvalue: the p-value for ``alternative``.
        exact: whether every sign flip was enumerated (else Monte Carlo).
        n_resamples: number of sign patterns evaluated.
        n_nonzero: number of pairs whose difference is not zero (only those can flip).
    """

    statistic: float
    pvalue: float
    exact: bool
    n_resamples: int
    n_nonzero: int


def paired_permutation_test(a: ArrayLike, b: ArrayLike, *, alternative: Alternative = "two-sided",
                            n_resamples: int = N_PERMUTATIONS, seed: int = SEED,
                            exact_max_nonzero: int = EXACT_MAX_NONZERO,
                            method: str = "auto") -> PermutationResult:
    """Paired (sign-flip) permutation test of ``mean(b - a) = 0``.

    Under the null hypothesis the two runs are exchangeable within each pair, so each difference
    ``d_i = b_i - a_i`` is as likely to be ``+d_i`` as ``-d_i``. The null distribution of the
    statistic :math:`T = \\frac1n \\sum_i s_i d_i` is built from sign vectors
    :math:`s \\in \\{-1, +1\\}^n`; zero differences do not move it, so only the :math:`m` non-zero
    ones are flipped:

    - exact when :math:`m \\le` ``exact_max_nonzero``: all :math:`2^m` sign vectors;
    - otherwise ``n_resamples`` random sign vectors, with the add-one estimate
      :math:`p = (1 + \\#\\{T^* \\text{ as extreme}\\}) / (1 + R)` (never 0; Phipson & Smyth 2010);
    - or, for large runs, the normal limit of the same sign-flip distribution when its Berry-Esseen
      bound is within the Monte Carlo estimate's standard error
      (:mod:`ragmeter.stats.large_sample`; ``method="auto"``, the default). ``method`` =
      ``"monte-carlo"`` always draws, ``"normal"`` always uses the limit past the exact range;
    - exact from the binomial when every non-zero difference has the same size and there are many
      (``method="auto"``; :func:`ragmeter.stats.large_sample.binomial_pvalue`).

    p-values: ``greater`` = :math:`P(T^* \\ge T)`, ``less`` = :math:`P(T^* \\le T)`,
    ``two-sided`` = :math:`P(|T^*| \\ge |T|)` (equal to scipy's ``2 * min(less, greater)`` since
    the null distribution is symmetric). Ties are counted as extreme (relative tolerance 1e-9).

    Returns:
        A :class:`PermutationResult`. With no pair, or all differences zero, ``pvalue`` is 1.

    Example:
        >>> paired_permutation_test([0, 0, 0, 0, 0], [1, 1, 1, 1, 1]).pvalue
        0.0625
    """
    _check_alternative(alternative)
    x, y = _pair(a, b)
    d = y - x
    n = d.size
    if n == 0:
        return PermutationResult(0.0, 1.0, True, 1, 0)
    nz = d[d != 0]
    m = nz.size
    observed = float(d.mean())
    if m == 0:
        return PermutationResult(observed, 1.0, True, 1, 0)
    obs_sum = float(nz.sum())
    tol = 1e-9 * max(1.0, float(np.abs(nz).sum()))

    def count(sums: np.ndarray) -> int:
        if alternative == "greater":
            return int(np.count_nonzero(sums >= obs_sum - tol))
        if alternative == "less":
            return int(np.count_nonzero(sums <= obs_sum + tol))
        return int(np.count_nonzero(np.abs(sums) >= abs(obs_sum) - tol))

    if m <= exact_max_nonzero:
        total = 1 << m
        hits = 0
        block = 1 << min(m, 16)
        bits = np.arange(m, dtype=np.int64)
        for start in range(0, total, block):
            codes = np.arange(start, start + block, dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            hits += count(signs @ nz)
        return PermutationResult(observed, hits / total, True, total, m)

    if n_resamples < 1:
        raise MetricError(f"n_resamples must be >= 1, got {n_resamples}")
    from ragmeter.stats.large_sample import normal_permutation_test

    if (large := normal_permutation_test(nz, alternative, n_resamples, method)) is not None:
        return PermutationResult(observed, large[0], large[1], 0, m)
    rng = np.random.default_rng(seed)
    hits = 0
    block = max(1, min(n_resamples, 4_000_000 // m))
    for start in range(0, n_resamples, block):
        r = min(block, n_resamples - start)
        signs = rng.integers(0, 2, size=(r, m), dtype=np.int8) * 2 - 1
        hits += count(signs @ nz)
    return PermutationResult(observed, (1 + hits) / (1 + n_resamples), False, n_resamples, m)


def cluster_paired_mean_ci(a: ArrayLike, b: ArrayLike, clusters: Sequence[str], *, level: float = 0.95,
                           bounds: Bounds = None) -> tuple[float, float] | None:
    """:func:`paired_mean_ci` for pairs that come in clusters (the turns of a conversation): the
    cluster-robust (CR1) interval of the mean difference over the clusters
    (:func:`ragmeter.stats.clustered.cluster_mean_ci`), within ``[low - high, high - low]``; when
    every cluster's mean difference is the same (all 0: nothing changed) the interval
    :func:`paired_mean_ci` gives that many equal differences, never a zero-width one.
    ``None`` with fewer than two clusters."""
    from ragmeter.stats.clustered import cluster_mean_ci

    x, y = _pair(a, b)
    return cluster_mean_ci(y - x, clusters, level=level, bounds=difference_bounds(value_bounds(x, y, bounds)))


def cluster_permutation_test(a: ArrayLike, b: ArrayLike, clusters: Sequence[str], *,
                             alternative: Alternative = "two-sided", n_resamples: int = N_PERMUTATIONS,
                             seed: int = SEED) -> PermutationResult:
    """The sign-flip permutation test of :func:`paired_permutation_test` for pairs that come in
    clusters: under the null hypothesis the two runs are exchangeable *per cluster* (a whole
    conversation answered by A or by B), so all the differences of a cluster flip together. The
    statistic ``T = (1/N) * sum_g s_g * D_g``, with ``D_g`` the sum of cluster ``g``'s
    differences is the paired test's statistic on the cluster sums, so this is
    :func:`paired_permutation_test` of ``D`` (exact up to 20 clusters with a non-zero sum, else
    Monte Carlo or its normal limit); ``statistic`` is the mean difference over all pairs."""
    from ragmeter.stats.clustered import cluster_codes

    x, y = _pair(a, b)
    if x.size != len(clusters):
        raise MetricError(f"{x.size} pairs but {len(clusters)} cluster labels")
    d = y - x
    if d.size == 0:
        return PermutationResult(0.0, 1.0, True, 1, 0)
    codes, g = cluster_codes(clusters)
    sums = np.bincount(codes, weights=d, minlength=g)
    r = paired_permutation_test(np.zeros(g), sums, alternative=alternative, n_resamples=n_resamples, seed=seed)
    return PermutationResult(float(d.mean()), r.pvalue, r.exact, r.n_resamples, r.n_nonzero)


@dataclass(frozen=True)
class WilcoxonResult:
    """Wilcoxon signed-rank test outcome; ``pvalue`` is ``None`` when the test does not fit."""

    pvalue: float | None
    statistic: float | None
    note: str | None = None


#: fewer non-zero differences cannot reach p < 0.05 two-sided (2 / 2**5 = 0.0625)
WILCOXON_MIN_NONZERO = 6


def wilcoxon_test(a: ArrayLike, b: ArrayLike, *,
                  alternative: Alternative = "two-sided") -> WilcoxonResult:
    """Wilcoxon signed-rank test of the paired differences (``scipy.stats.wilcoxon``).

    Zero differences are dropped (``zero_method="wilcox"``); ties get average ranks and scipy's
    normal approximation with tie correction when they occur. The test fits when there are at
    least six non-zero differences: with fewer, no outcome can be significant at 0.05 and the
    result is reported as not applicable. It tests the median (location) of the differences,
    while the permutation test tests their mean; for 0/1 scores it reduces to a sign test.
    """
    _check_alternative(alternative)
    x, y = _pair(a, b)
    d = y - x
    m = int(np.count_nonzero(d))
    if m < WILCOXON_MIN_NONZERO:
        return WilcoxonResult(None, None, f"needs >= {WILCOXON_MIN_NONZERO} non-zero differences, got {m}")
    from ragmeter.stats.large_sample import WILCOXON_ASYMPTOTIC_FROM, wilcoxon_asymptotic

    if d.size >= WILCOXON_ASYMPTOTIC_FROM:  # scipy's normal approximation, computed in numpy
        p, stat = wilcoxon_asymptotic(d, alternative)
        return WilcoxonResult(p, stat)
    from scipy.stats import wilcoxon

    res = wilcoxon(d, zero_method="wilcox", alternative=alternative)
    return WilcoxonResult(float(res.pvalue), float(res.statistic))


def win_tie_loss(a: ArrayLike, b: ArrayLike, *, tol: float = 1e-12) -> tuple[int, int, int]:
    """Counts of pairs where ``b`` is higher (win), equal within ``tol`` (tie), lower (loss)."""
    x, y = _pair(a, b)
    d = y - x
    return int(np.sum(d > tol)), int(np.sum(np.abs(d) <= tol)), int(np.sum(d < -tol))


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (step-down; controls the family-wise error rate).

    With the :math:`m` p-values sorted ascending :math:`p_{(1)} \\le \\dots \\le p_{(m)}`:

    .. math::  \\tilde p_{(i)} = \\min\\Big(1, \\max_{j \\le i} (m - j + 1)\\, p_{(j)}\\Big)

    and each adjusted value goes back to its original position. Rejecting where
    :math:`\\tilde p < \\alpha` is Holm's procedure.

    Example:
        >>> holm([0.01, 0.04, 0.03]).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    if p.size == 0:
        return p
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise MetricError("p-values must be in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    out = np.empty(m)
    out[order] = adjusted_sorted
    return out


def paired_power(sd_diff: float, delta: float, n: int, *, alpha: float = 0.05,
                 alternative: Literal["two-sided", "one-sided"] = "two-sided") -> float:
    """Power of the paired t-test to detect a true mean difference ``delta`` with ``n`` pairs.

    Assumes the paired differences are roughly normal with standard deviation ``sd_diff``:
    the t statistic then follows a non-central t with ``n - 1`` degrees of freedom and
    non-centrality :math:`\\lambda = \\delta\\sqrt n / \\sigma_d`, and

    .. math:: \\text{power} = P(T_{n-1,\\lambda} > t_{1-\\alpha'}) + P(T_{n-1,\\lambda} < -t_{1-\\alpha'})

    with :math:`\\alpha' = \\alpha/2` two-sided (second term only then) or :math:`\\alpha` one-sided.
    """
    _check_power_args(sd_diff, delta, alpha)
    if n < 2:
        return float("nan")
    from scipy.stats import nct, t

    df = n - 1
    if sd_diff == 0:
        return 1.0
    nc = abs(delta) * math.sqrt(n) / sd_diff
    if alternative == "one-sided":
        return float(nct.sf(t.ppf(1 - alpha, df), df, nc))
    crit = t.ppf(1 - alpha / 2, df)
    return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))


def _check_power_args(sd_diff: float, delta: float, alpha: float) -> None:
    if not (sd_diff >= 0 and math.isfinite(sd_diff)):
        raise MetricError(f"the standard deviation of the differences must be >= 0, got {sd_diff}")
    if not (delta != 0 and math.isfinite(delta)):
        raise MetricError(f"the difference to detect must be non-zero, got {delta}")
    if not 0 < alpha < 1:
        raise MetricError(f"alpha must be in (0, 1), got {alpha}")


def sample_size_paired(sd_diff: float, delta: float, *, alpha: float = 0.05, power: float = 0.8,
                       alternative: Literal["two-sided", "one-sided"] = "two-sided",
                       max_n: int = 10_000_000) -> int:
    """Smallest number of paired samples for which :func:`paired_power` reaches ``power``.

    Starts from the normal approximation
    :math:`n_0 = \\lceil ((z_{1-\\alpha'} + z_{\\text{power}})\\, \\sigma_d / \\delta)^2 \\rceil`
    and steps to the exact non-central-t answer (always ``>= 2``).

    Example:
        >>> sample_size_paired(0.5, 0.1)  # doctest: +SKIP
        199
    """
    _check_power_args(sd_diff, delta, alpha)
    if not 0 < power < 1:
        raise MetricError(f"power must be in (0, 1), got {power}")
    if sd_diff == 0:
        return 2
    from scipy.stats import norm

    a = alpha / 2 if alternative == "two-sided" else alpha
    n0 = math.ceil(((norm.ppf(1 - a) + norm.ppf(power)) * sd_diff / abs(delta)) ** 2)
    n = max(2, n0)
    if n > max_n:
        return n
    # the t-test needs slightly more than the z approximation; walk up (few steps), or down if n0 overshoots
    while n < max_n and paired_power(sd_diff, delta, n, alpha=alpha, alternative=alternative) < power:
        n += 1
    while n > 2 and paired_power(sd_diff, delta, n - 1, alpha=alpha, alternative=alternative) >= power:
        n -= 1
    return n


@dataclass(frozen=True)
class PairedComparison:
    """Everything :func:`compare_paired` reports for one metric."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    pvalue_exact: bool
    wilcoxon_pvalue: float | None
    wilcoxon_note: str | None
    wins: int
    ties: int
    losses: int
    #: the number of clusters when the pairs came in clusters (``compare_paired(clusters=...)``)
    n_clusters: int | None = None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


#: why a clustered comparison has no Wilcoxon p-value
CLUSTERED_WILCOXON_NOTE = "not computed: the pairs are clustered (the cluster sign-flip test decides)"


def compare_paired(a: ArrayLike, b: ArrayLike, *, level: float = 0.95,
                   n_resamples: int = N_PERMUTATIONS, seed: int = SEED,
                   bounds: Bounds = None, clusters: Sequence[str] | None = None) -> PairedComparison:
    """Means, mean difference ``b - a`` with its CI (:func:`paired_mean_ci`; ``bounds`` is the
    metric's range), two-sided permutation and Wilcoxon p-values, and win/tie/loss counts (``b``
    vs ``a``) for two aligned score arrays. With ``clusters`` (one label per pair: the
    conversation of each turn) the interval and the test are the clustered ones
    (:func:`cluster_paired_mean_ci`, :func:`cluster_permutation_test`) and Wilcoxon's test, which
    assumes independent pairs, is not computed."""
    x, y = _pair(a, b)
    n = x.size
    if n == 0:
        raise MetricError("no paired samples to compare (no sample has a value in both runs)")
    w, t, lo = win_tie_loss(x, y)
    if clusters is not None:
        from ragmeter.stats.clustered import cluster_codes

        ci = paired_mean_ci(x, y, level=level, bounds=bounds, clusters=clusters)
        perm = cluster_permutation_test(x, y, clusters, n_resamples=n_resamples, seed=seed)
        return PairedComparison(n=n, mean_a=float(x.mean()), mean_b=float(y.mean()),
                                diff=float((y - x).mean()), ci_low=ci[0] if ci else None,
                                ci_high=ci[1] if ci else None, pvalue=perm.pvalue, pvalue_exact=perm.exact,
                                wilcoxon_pvalue=None, wilcoxon_note=CLUSTERED_WILCOXON_NOTE,
                                wins=w, ties=t, losses=lo, n_clusters=cluster_codes(clusters)[1])
    ci = paired_mean_ci(x, y, level=level, bounds=bounds)
    perm = paired_permutation_test(x, y, n_resamples=n_resamples, seed=seed)
    wil = wilcoxon_test(x, y)
    return PairedComparison(n=n, mean_a=float(x.mean()), mean_b=float(y.mean()),
                            diff=float((y - x).mean()), ci_low=ci[0] if ci else None,
                            ci_high=ci[1] if ci else None, pvalue=perm.pvalue,
                            pvalue_exact=perm.exact, wilcoxon_pvalue=wil.pvalue,
                            wilcoxon_note=wil.note, wins=w, ties=t, losses=lo)


#: the verdict words shared by ``compare``, ``gate``, the HTML report and the dashboard
VERDICT_BETTER = "better"
VERDICT_WORSE = "worse"
VERDICT_NONE = "no significant difference"


def verdict(diff: float | None, pvalue_adjusted: float | None, *, higher_is_better: bool = True,
            alpha: float = 0.05) -> str:
    """The one decision rule: ``"better"`` / ``"worse"`` (the challenger ``b`` relative to ``a``) when
    the multiplicity-adjusted paired permutation p-value is below ``alpha`` and the mean difference is
    not zero, else ``"no significant difference"``. The paired interval is shown beside the verdict
    but does not decide it (an interval excluding 0 with an adjusted p above ``alpha`` is a
    difference that does not survive the correction for the number of tests)."""
    if diff is None or pvalue_adjusted is None or not diff or not pvalue_adjusted < alpha:
        return VERDICT_NONE
    return VERDICT_BETTER if (diff > 0) == higher_is_better else VERDICT_WORSE


def adjust_pvalues(pvalues: Sequence[float | None], correction: str = "holm") -> list[float | None]:
    """Holm-adjusted p-values over the family of tests (``None`` entries are not tests and stay
    ``None``); ``correction="none"`` returns them unchanged."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    raw = np.array([pvalues[i] for i in idx], dtype=np.float64)
    adj = holm(raw) if correction == "holm" else raw
    for i, p in zip(idx, adj, strict=True):
        out[i] = float(p)
    return out


def family_verdicts(rows: Sequence[tuple[float | None, float | None, bool]], *, alpha: float = 0.05,
                    correction: str = "holm") -> list[tuple[float | None, str]]:
    """Adjusted p-value and :func:`verdict` for every ``(diff, pvalue, higher_is_better)`` test of one
    comparison (all metrics x run pairs together: the family the Holm correction runs over)."""
    adj = adjust_pvalues([r[1] for r in rows], correction)
    return [(p, verdict(r[0], p, higher_is_better=r[2], alpha=alpha)) for r, p in zip(rows, adj, strict=True)]
