"""Paired statistics: permutation test against scipy, bootstrap coverage, Holm by hand, power by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from ragmeter.core.errors import MetricError
from ragmeter.stats.paired import (
    compare_paired,
    holm,
    paired_bootstrap_ci,
    paired_permutation_test,
    paired_power,
    sample_size_paired,
    wilcoxon_test,
    win_tie_loss,
)


def _scipy_perm(a, b, alternative):
    return sps.permutation_test((np.asarray(b, float), np.asarray(a, float)),
                                lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                alternative=alternative, n_resamples=np.inf, vectorized=True).pvalue


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_exact_permutation_matches_scipy_on_many_small_inputs(alternative):
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(2, 11))
        kind = rng.integers(0, 3)
        if kind == 0:  # binary correctness
            a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)
        elif kind == 1:  # graded judge scale with ties (0..5 = 0.0..1.0; integers keep scipy's
            a, b = rng.integers(0, 6, n), rng.integers(0, 6, n)  # float sums exact)
        else:
            a, b = rng.random(n), rng.random(n)
        ours = paired_permutation_test(a, b, alternative=alternative)
        assert ours.exact
        assert ours.pvalue == pytest.approx(_scipy_perm(a, b, alternative), abs=1e-12)


def test_a_mean_difference_that_is_zero_up_to_rounding_gives_p_one():
    # 0.2 + 0.4 - 1 - 0.2 + 0.2 + 0.2 + 0.2 is 0 exactly but not in floating point; scipy then
    # reports 0.96875 because its null distribution inherits the rounding noise
    a = [0.4, 0.4, 0.6, 1.0, 0.8, 0.0, 0.8, 0.2]
    b = [0.4, 0.6, 1.0, 0.0, 0.6, 0.2, 1.0, 0.4]
    assert paired_permutation_test(a, b).pvalue == 1.0


def test_permutation_hand_values_and_edges():
    # five wins out of five: only the all-positive and all-negative sign patterns are as extreme
    assert paired_permutation_test([0] * 5, [1] * 5).pvalue == pytest.approx(2 / 32)
    assert paired_permutation_test([0] * 5, [1] * 5, alternative="greater").pvalue == pytest.approx(1 / 32)
    assert paired_permutation_test([0] * 5, [1] * 5, alternative="less").pvalue == pytest.approx(1.0)
    same = paired_permutation_test([0.3, 0.7], [0.3, 0.7])
    assert same.pvalue == 1.0 and same.statistic == 0.0
    assert paired_permutation_test([], []).pvalue == 1.0
    with pytest.raises(MetricError, match="same length"):
        paired_permutation_test([1, 2], [1])
    with pytest.raises(MetricError, match="finite"):
        paired_permutation_test([1, float("nan")], [1, 2])
    with pytest.raises(MetricError, match="alternative"):
        paired_permutation_test([1], [2], alternative="bigger")


def test_monte_carlo_permutation_agrees_with_exact_and_is_never_zero():
    rng = np.random.default_rng(3)
    a = rng.random(18)
    b = a + rng.normal(0.15, 0.3, 18)
    exact = paired_permutation_test(a, b).pvalue
    mc = paired_permutation_test(a, b, exact_max_nonzero=5, n_resamples=20000, seed=1)
    assert not mc.exact and abs(mc.pvalue - exact) < 0.01
    big = paired_permutation_test(np.zeros(200), np.ones(200), n_resamples=500)
    assert 0 < big.pvalue <= 1 / 501 + 1e-12


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=9))
def test_permutation_is_antisymmetric_and_in_range(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    two = paired_permutation_test(a, b).pvalue
    assert 0 < two <= 1
    assert paired_permutation_test(b, a).pvalue == pytest.approx(two)
    g = paired_permutation_test(a, b, alternative="greater").pvalue
    lo = paired_permutation_test(b, a, alternative="less").pvalue
    assert g == pytest.approx(lo)


def test_bootstrap_ci_covers_the_true_difference_about_95_percent():
    # simulate paired correctness: run B flips wrong answers to right with prob .15 and back with .05
    rng = np.random.default_rng(11)
    p, up, down, n = 0.6, 0.15, 0.05, 120
    true = (1 - p) * up - p * down
    hits = 0
    reps = 300
    for r in range(reps):
        a = (rng.random(n) < p).astype(float)
        u = rng.random(n)
        b = np.where(a == 1, (u >= down).astype(float), (u < up).astype(float))
        lo, hi = paired_bootstrap_ci(a, b, n_resamples=800, seed=r)
        hits += lo <= true <= hi
    assert 0.90 <= hits / reps <= 0.99


def test_bootstrap_ci_edges():
    assert paired_bootstrap_ci([1.0], [0.0]) is None
    assert paired_bootstrap_ci([0, 1, 0], [1, 2, 1]) == (1.0, 1.0)
    lo, hi = paired_bootstrap_ci([0, 0, 1, 1] * 10, [1, 1, 1, 1] * 10)
    assert lo < 0.5 < hi and hi <= 1


def test_holm_against_a_hand_worked_example():
    # p = (0.01, 0.04, 0.03, 0.005), m = 4; sorted 0.005, 0.01, 0.03, 0.04
    # scaled: 4*.005=.02, 3*.01=.03, 2*.03=.06, 1*.04=.04 -> running max .02 .03 .06 .06
    adj = holm([0.01, 0.04, 0.03, 0.005])
    assert adj.tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.9]).tolist() == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]).tolist() == [0.02]
    assert holm([]).size == 0
    with pytest.raises(MetricError):
        holm([1.2])


def test_holm_controls_family_wise_error_under_the_null():
    rng = np.random.default_rng(5)
    reps, m, alpha = 4000, 6, 0.05
    p = rng.random((reps, m))  # uniform p-values: every null true
    fw = np.mean([np.any(holm(row) < alpha) for row in p])
    assert fw <= alpha + 0.01


def test_wilcoxon_matches_scipy_and_says_when_it_does_not_fit():
    rng = np.random.default_rng(2)
    a, b = rng.random(30), rng.random(30) + 0.2
    w = wilcoxon_test(a, b)
    assert w.pvalue == pytest.approx(sps.wilcoxon(b - a).pvalue)
    small = wilcoxon_test([0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0])
    assert small.pvalue is None and "non-zero" in small.note


def test_win_tie_loss_and_compare_paired():
    assert win_tie_loss([0, 1, 0.5, 1], [1, 1, 0.25, 1]) == (1, 2, 1)
    c = compare_paired([0, 0, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0])
    assert c.n == 8 and c.diff == pytest.approx(5 / 8) and (c.wins, c.ties, c.losses) == (5, 3, 0)
    assert c.pvalue == pytest.approx(2 / 32) and c.ci_low <= c.diff <= c.ci_high
    with pytest.raises(MetricError, match="no paired"):
        compare_paired([], [])


def test_sample_size_reaches_the_power_by_simulation():
    sd, delta, alpha = 0.4, 0.1, 0.05
    n = sample_size_paired(sd, delta, alpha=alpha, power=0.8, alternative="one-sided")
    # the normal approximation is ((1.645 + 0.842) * 0.4 / 0.1)^2 = 98.9 -> the t-test needs a bit more
    assert 99 <= n <= 103
    assert paired_power(sd, delta, n, alternative="one-sided") >= 0.8 > paired_power(sd, delta, n - 1,
                                                                                       alternative="one-sided")
    rng = np.random.default_rng(0)
    reps = 3000
    d = rng.normal(-delta, sd, size=(reps, n))  # current - baseline: a real drop of delta
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    rejected = np.mean(t < sps.t.ppf(alpha, n - 1))
    assert 0.77 <= rejected <= 0.83


def test_sample_size_two_sided_needs_more_and_inputs_are_checked():
    one = sample_size_paired(0.5, 0.1, alternative="one-sided")
    two = sample_size_paired(0.5, 0.1, alternative="two-sided")
    assert two > one
    assert sample_size_paired(0.0, 0.1) == 2
    for bad in ({"sd_diff": -1, "delta": 0.1}, {"sd_diff": 0.3, "delta": 0}, {"sd_diff": 0.3, "delta": 0.1, "alpha": 1}):
        with pytest.raises(MetricError):
            sample_size_paired(**bad)
    with pytest.raises(MetricError):
        sample_size_paired(0.3, 0.1, power=1.0)
