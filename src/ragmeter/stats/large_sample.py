"""The paired sign-flip permutation test of a large run in closed form.

Under the null hypothesis of :func:`ragmeter.stats.paired.paired_permutation_test` the
statistic :math:`S = \\sum_i s_i d_i` is a sum of independent terms :math:`s_i d_i` (random signs
:math:`s_i = \\pm 1`) with mean 0, variance :math:`d_i^2` and third absolute moment
:math:`|d_i|^3`. Its distribution is therefore within

.. math::  \\varepsilon = C \\, \\frac{\\sum_i |d_i|^3}{(\\sum_i d_i^2)^{3/2}}, \\qquad C = 0.56

of the normal :math:`N(0, \\sum_i d_i^2)` at every point (the Berry-Esseen theorem for
non-identically distributed terms; the constant 0.56 is Shevtsova's, 2010), so the p-value
:math:`P(|S^*| \\ge |S|) = \\operatorname{erfc}(|S| / \\sqrt{2 \\sum_i d_i^2})` (two-sided; one-sided
:math:`1 - \\Phi` or :math:`\\Phi` of :math:`S / \\sqrt{\\sum_i d_i^2}`) is off by at most
:math:`2 \\varepsilon` (two-sided) or :math:`\\varepsilon`. The Monte Carlo estimate drawn from
:math:`R` sign vectors has a standard error up to :math:`0.5 / \\sqrt R` (0.005 at the default
10,000). ``method="auto"`` uses the closed form when its bound on the p-value's error is within
two of those standard errors (:math:`1 / \\sqrt R`, 0.01), the spread a Monte Carlo p-value has
anyway; for a 0-1 metric that is about 12,500 non-zero differences or more, for a continuous one
(token F1) a few tens of thousands: a 100,000-sample comparison then
takes milliseconds instead of the 10,000 x 100,000 sign flips of the draw, and gives the same
verdicts (``benchmarks/after_run.py`` checks both on two 100,000-sample runs).

When every non-zero difference has the same size (a 0-1 metric such as exact match) and there are
at least :data:`BINOMIAL_FROM` of them, the sign-flip distribution is a scaled binomial and its
p-value is computed exactly (:func:`binomial_pvalue`) rather than drawn.
"""

from __future__ import annotations

import math

import numpy as np

from ragmeter.core.errors import MetricError

#: Shevtsova (2010): the Berry-Esseen constant for sums of independent, not identically
#: distributed terms
BERRY_ESSEEN_C = 0.56
METHODS = ("auto", "monte-carlo", "normal")


def berry_esseen_bound(nz: np.ndarray) -> float:
    """The largest distance between the sign-flip distribution of ``sum(s_i * d_i)`` and its
    normal limit, for the non-zero differences ``nz``."""
    sq = nz * nz
    v = float(sq.sum())
    return BERRY_ESSEEN_C * float((sq * np.abs(nz)).sum()) / v ** 1.5


def normal_pvalue(nz: np.ndarray, alternative: str) -> float:
    """p-value of the observed ``sum(nz)`` under the normal limit of the sign-flip distribution."""
    z = float(nz.sum()) / math.sqrt(float((nz * nz).sum()))
    if alternative == "greater":
        return 0.5 * math.erfc(z / math.sqrt(2.0))
    if alternative == "less":
        return 0.5 * math.erfc(-z / math.sqrt(2.0))
    return math.erfc(abs(z) / math.sqrt(2.0))


def normal_permutation_test(nz: np.ndarray, alternative: str, n_resamples: int, method: str
                            ) -> tuple[float, bool] | None:
    """``(p-value, exact)`` in closed form: the binomial's (exact) for one size of difference, else
    the normal limit's when ``method`` asks for it (``"normal"``) or allows it (``"auto"``,
    and the approximation's bound is within two standard errors of ``n_resamples`` draws); ``None``
    when the caller should draw sign vectors."""
    if method not in METHODS:
        raise MetricError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "monte-carlo":
        return None
    if method == "auto" and (exact := binomial_pvalue(nz, alternative)) is not None:
        return exact, True
    bound = berry_esseen_bound(nz) * (1.0 if alternative != "two-sided" else 2.0)
    if method == "normal" or bound <= 1.0 / math.sqrt(n_resamples):
        return normal_pvalue(nz, alternative), False
    return None


#: ``scipy.stats.wilcoxon`` (``method="auto"``) uses its normal approximation past this many pairs
WILCOXON_ASYMPTOTIC_FROM = 51


def wilcoxon_asymptotic(d: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """``(pvalue, statistic)`` of the Wilcoxon signed-rank test as ``scipy.stats.wilcoxon(d,
    zero_method="wilcox", correction=False, method="auto")`` computes it for more than 50 pairs (its
    normal approximation with the tie correction), in numpy, without importing ``scipy.stats``
    (about a second on a loaded machine): zeros dropped, average ranks of ``|d|``,
    :math:`z = (R^+ - n(n+1)/4) / \\sqrt{(n(n+1)(2n+1) - \\sum_t (t^3 - t)/2) / 24}`; the statistic is
    :math:`\\min(R^+, R^-)` two-sided, else :math:`R^+`."""
    nz = d[d != 0]
    n = float(nz.size)
    a = np.abs(nz)
    order = np.argsort(a, kind="stable")
    _, first, counts = np.unique(a[order], return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0  # average rank of each group of equal |d|
    ranks = np.empty(nz.size)
    ranks[order] = np.repeat(avg, counts)
    r_plus = float(ranks[nz > 0].sum())
    r_minus = float(ranks[nz < 0].sum())
    tie = float(((counts.astype(np.float64) ** 3) - counts).sum())
    se = math.sqrt((n * (n + 1) * (2 * n + 1) - tie / 2) / 24)
    z = (r_plus - n * (n + 1) * 0.25) / se
    if alternative == "greater":
        p = 0.5 * math.erfc(z / math.sqrt(2.0))
    elif alternative == "less":
        p = 0.5 * math.erfc(-z / math.sqrt(2.0))
    else:
        p = math.erfc(abs(z) / math.sqrt(2.0))
    return p, (min(r_plus, r_minus) if alternative == "two-sided" else r_plus)


#: past this many non-zero differences of one magnitude (a 0-1 metric), the sign-flip distribution
#: is read off the binomial exactly instead of drawn
BINOMIAL_FROM = 1000


def binomial_pvalue(nz: np.ndarray, alternative: str) -> float | None:
    """The exact p-value of the sign-flip test when every non-zero difference has the same size
    ``c`` (a 0-1 metric): ``S* = c (2K - m)`` with ``K ~ Binomial(m, 1/2)``, so the tail is a sum
    of binomial probabilities (what the exhaustive enumeration gives for few differences, without
    2^m sign vectors); ``None`` when the sizes differ or there are fewer than
    :data:`BINOMIAL_FROM`."""
    m = nz.size
    a = np.abs(nz)
    if m < BINOMIAL_FROM or not np.all(a == a[0]):
        return None
    k = int(np.count_nonzero(nz > 0))
    j = np.arange(m + 1)
    logc = math.lgamma(m + 1) - m * math.log(2.0)
    log_pmf = logc - np.array([math.lgamma(x + 1) + math.lgamma(m - x + 1) for x in range(m + 1)])
    pmf = np.exp(log_pmf)
    if alternative == "greater":
        p = float(pmf[j >= k].sum())
    elif alternative == "less":
        p = float(pmf[j <= k].sum())
    else:
        p = float(pmf[np.abs(2 * j - m) >= abs(2 * k - m)].sum())
    return min(1.0, p)
