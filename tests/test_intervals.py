"""Confidence intervals of means (ragmeter.stats) and the shared verdict rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, bootstrap

import ragmeter
from ragmeter import stats
from ragmeter.stats.paired import family_verdicts, holm, verdict


def test_all_pass_exact_match_gets_clopper_pearson_interval(tmp_path):
    rows = [{"question": f"q{i}", "answer": "Paris", "reference": "Paris"} for i in range(20)]
    res = ragmeter.evaluate(rows, ["exact_match"], db=f"sqlite:///{tmp_path}/r.db")
    s = res.summary["exact_match"]
    assert s["mean"] == 1.0 and s["ci_method"] == "clopper_pearson"
    assert 0.8 < s["ci_low"] < 0.9 and s["ci_high"] == 1.0


@pytest.mark.parametrize("k,n", [(0, 10), (19, 20), (20, 20), (7, 50), (150, 200)])
def test_clopper_pearson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(0.95, method="exact")
    x = np.r_[np.ones(k), np.zeros(n - k)]
    assert stats.mean_ci(x) == pytest.approx((ref.low, ref.high), abs=1e-9)


def _reference_quasi_score(x, low, high, level=0.95):
    """The quasi-binomial score interval written independently: scipy's t quantile and kurtosis,
    and the two roots of the score equation found by brentq."""
    from scipy.optimize import brentq
    from scipy.stats import kurtosis, t

    y = (np.asarray(x, float) - low) / (high - low)
    n, m, s2 = y.size, y.mean(), y.var(ddof=1)
    nu = 2 * n * (n - 1) / ((kurtosis(y, fisher=False, bias=True) - 1) * (n - 1) + 2)
    q = t.ppf(1 - (1 - level) / 2, np.floor(np.clip(nu, 1, n - 1)))
    phi = s2 / (m * (1 - m))

    def score(mu):
        return (m - mu) ** 2 - q * q * phi * mu * (1 - mu) / n

    lo, hi = brentq(score, 0.0, m), brentq(score, m, 1.0)
    return low + (high - low) * lo, low + (high - low) * hi


@pytest.mark.parametrize("seed,n,low,high", [(1, 10, 0, 1), (2, 37, 0, 1), (3, 200, 0, 100), (4, 5, -1, 1),
                                             (5, 1000, 0, 1)])
def test_quasi_score_matches_an_independent_implementation(seed, n, low, high):
    rng = np.random.default_rng(seed)
    x = low + (high - low) * np.where(rng.random(n) < 0.3, 1.0, rng.beta(2, 5, n))
    assert stats.choose_method(x, bounds=(low, high)) == "quasi_score"
    ours = stats.mean_ci(x, bounds=(low, high))
    assert ours == pytest.approx(_reference_quasi_score(x, low, high), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 9, 19, 30, 99, 1000, 29_999, 1e6])
@pytest.mark.parametrize("p", [0.975, 0.95, 0.995])
def test_t_quantile_matches_scipy(df, p):
    from scipy.special import stdtrit

    assert stats.t_quantile(p, df) == pytest.approx(float(stdtrit(df, p)), rel=1e-8)


def test_far_from_the_bounds_the_interval_is_students_t():
    """Values far from both bounds: phi * mu * (1 - mu) is flat around the mean, the score interval
    is the t interval (large n: kurtosis near 3, so nu = n - 1)."""
    from scipy.stats import t

    x = np.random.default_rng(7).normal(0.5, 0.05, 30_000)
    lo, hi = stats.mean_ci(x, bounds=(0, 1))
    h = t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    assert (lo, hi) == pytest.approx((x.mean() - h, x.mean() + h), abs=2e-6)


ISSUE_EXAMPLES = [[0.2, 0.4, 0.9, 0.95, 1, 1, 1, 1, 1, 1], [1, 1, 1, 0.833], [0, 0, 0.5, 1, 1]]


@pytest.mark.parametrize("values", ISSUE_EXAMPLES)
@pytest.mark.parametrize("bounds", [(0, 1), None])
def test_the_issue_examples_stay_in_range_around_the_mean(values, bounds):
    lo, hi = stats.mean_ci(values, bounds=bounds)
    m = float(np.mean(values))
    assert 0 <= lo < m < hi <= 1
    if bounds is None:  # without a declared range: within the values observed
        assert min(values) <= lo and hi <= max(values)


def test_without_bounds_01_data_use_0_1_and_other_data_the_observed_range():
    assert stats.mean_ci([1.0] * 20) == stats.mean_ci([1.0] * 20, bounds=(0, 1))
    lo, hi = stats.mean_ci([0.3, 0.5, 0.45, 0.41])
    assert 0.3 <= lo < 0.415 < hi <= 0.5
    assert stats.mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)  # the observed range has no width


def test_constant_values_inside_the_range():
    """No value differs from v: the share that does is below Clopper-Pearson's bound for 0 of n,
    and the mean moves at most that far toward either bound."""
    share = 1 - 0.025 ** (1 / 20)
    lo, hi = stats.mean_ci([0.5] * 20, bounds=(0, 1))
    assert (lo, hi) == pytest.approx((0.5 - share * 0.5, 0.5 + share * 0.5))
    assert stats.mean_ci([0.0] * 10, bounds=(-1, 1)) == pytest.approx((-0.3085, 0.3085), abs=1e-4)
    assert stats.choose_method([0.5] * 3, bounds=(0, 1)) == "constant"


def test_values_at_the_bounds_of_any_range_get_clopper_pearson():
    ref = binomtest(7, 10).proportion_ci(0.95, method="exact")
    x = [100.0] * 7 + [0.0] * 3
    assert stats.choose_method(x, bounds=(0, 100)) == "clopper_pearson"
    assert stats.mean_ci(x, bounds=(0, 100)) == pytest.approx((100 * ref.low, 100 * ref.high))
    # paired differences of a 0/1 metric that all sit at -1 or +1
    d = [1.0] * 7 + [-1.0] * 3
    assert stats.mean_ci(d, bounds=(-1, 1)) == pytest.approx((2 * ref.low - 1, 2 * ref.high - 1))


def test_tiny_inputs_and_bad_arguments():
    assert stats.mean_ci([]) is None
    assert stats.mean_ci([0.5]) is None
    assert stats.mean_ci([0.5], bounds=(0, 1)) is None
    assert stats.mean_ci([1.0])[0] == pytest.approx(0.025)  # one pass: Clopper-Pearson is defined
    lo, hi = stats.mean_ci([0.3, 0.5], bounds=(0, 1))
    assert 0 <= lo < 0.4 < hi <= 1
    with pytest.raises(ValueError, match="low < high"):
        stats.mean_ci([0.3, 0.5], bounds=(1, 0))
    with pytest.raises(ValueError, match="finite"):
        stats.mean_ci([0.3, float("nan")])
    with pytest.raises(ValueError, match="level"):
        stats.mean_ci([0.3, 0.5], level=1.5)


def test_values_outside_the_declared_range_widen_it():
    """A metric that breaks its own range does not get an interval that excludes its mean."""
    lo, hi = stats.mean_ci([0.5, 1.2, 0.9], bounds=(0, 1))
    assert lo < np.mean([0.5, 1.2, 0.9]) < hi <= 1.2


def test_infinite_side_is_the_observed_extreme():
    x = [3.0, 7.5, 12.0, 4.0]
    lo, hi = stats.mean_ci(x, bounds=(0, float("inf")))
    assert 0 <= lo < np.mean(x) < hi <= 12.0


def test_rows_equal_one_at_a_time_and_deterministic():
    rng = np.random.default_rng(9)
    x = np.where(rng.random((300, 12)) < 0.5, 1.0, rng.random((300, 12)))
    x[:40] = np.round(x[:40])  # some 0/1 rows
    x[40:45] = 0.25  # some constant rows
    res = stats.mean_ci_rows(x, bounds=(0, 1))
    for i in range(0, 300, 7):  # the same closed form; mean_ci's moments are exact sums, the rows' numpy's
        assert (res.low[i], res.high[i]) == pytest.approx(stats.mean_ci(x[i], bounds=(0, 1)), rel=1e-12, abs=1e-15)
        assert res.method[i] == stats.choose_method(x[i], bounds=(0, 1))
    again = stats.mean_ci_rows(x, bounds=(0, 1))
    assert np.array_equal(res.low, again.low) and np.array_equal(res.high, again.high)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=40),
       low=st.sampled_from([0.0, -1.0, -5.0]), span=st.sampled_from([1.0, 2.0, 100.0]),
       snap=st.booleans())
def test_any_values_give_an_interval_in_range_around_the_mean(values, low, span, snap):
    high = low + span
    x = low + span * (np.round(np.asarray(values)) if snap else np.asarray(values))
    lo, hi = stats.mean_ci(x, bounds=(low, high))
    m = float(np.clip(x.mean(), low, high))
    assert low <= lo <= m <= hi <= high
    if x.min() < x.max() and low < m < high:  # (a mean of [0, 5e-324] underflows to the bound itself)
        assert lo < m < hi


def test_benchmark_bca_reference_matches_scipy():
    """The study's vectorised BCa (benchmarks/intervals.py) is scipy's BCa up to resampling noise."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "intervals.py"
    spec = importlib.util.spec_from_file_location("intervals_study", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    x = np.random.default_rng(3).beta(2, 5, (1, 150))
    sb = np.sort(study.boot_means(x, 20_000, np.random.default_rng(1)), axis=1)
    lo, hi = study.bca_ci(x, sb)
    ref = bootstrap((x[0],), np.mean, method="BCa", n_resamples=20_000, random_state=1).confidence_interval
    assert (lo[0], hi[0]) == pytest.approx((ref.low, ref.high), abs=0.004)


def test_verdict_rule():
    assert verdict(0.1, 0.01) == "better" and verdict(0.1, 0.01, higher_is_better=False) == "worse"
    assert verdict(0.1, 0.06) == "no significant difference"
    assert verdict(0.0, 0.0) == "no significant difference"
    p = [0.028, 0.3, 0.5, 0.6, 0.7, 0.9]
    decided = family_verdicts([(0.1, q, True) for q in p])
    assert [d[0] for d in decided] == pytest.approx(holm(p).tolist())
    assert decided[0][1] == "no significant difference"  # 0.028 x 6 = 0.168


def test_report_verdict_equals_compare_winner(tmp_path):
    from ragmeter.analysis.compare import compare_runs
    from ragmeter.apps.report.data import compare_view
    from ragmeter.store import Store

    rng = np.random.default_rng(11)
    words = "the quick brown fox jumps over a lazy dog near river bank today".split()
    refs = [" ".join(rng.choice(words, 6)) for _ in range(80)]

    def noisy(r: str, keep: float) -> str:
        return " ".join(w if rng.random() < keep else str(rng.choice(words)) for w in r.split())

    url = f"sqlite:///{tmp_path}/c.db"
    metrics = ["exact_match", "token_f1", "rouge1_fmeasure", "rougeL_fmeasure", "bleu", "chrf"]
    ids = []
    for keep in (0.6, 0.66):
        rows = [{"id": f"s{i}", "question": f"q{i}", "answer": noisy(r, keep), "reference": r}
                for i, r in enumerate(refs)]
        ids.append(ragmeter.evaluate(rows, metrics, db=url).run_id)
    store = Store(url)
    cmp = compare_runs(ids, store=store)
    view = compare_view(store, ids)
    by_metric = {d["metric"]: d for d in view["differences"]}
    assert set(by_metric) == {r.metric for r in cmp.rows} == set(metrics)
    to_winner = {"better": "b", "worse": "a", "no significant difference": None}
    for r in cmp.rows:
        d = by_metric[r.metric]
        assert to_winner[d["verdict"]] == r.winner, r.metric
        assert d["p_adjusted"] == pytest.approx(r.pvalue_adjusted)
        assert (d["ci_low"], d["ci_high"]) == pytest.approx((r.ci_low, r.ci_high))


def test_relative_gate_shows_relative_interval():
    from ragmeter.analysis.gate import gate
    from ragmeter.analysis.runs import RunValues

    rng = np.random.default_rng(5)
    ids = [f"s{i}" for i in range(60)]
    base_vals = rng.uniform(0.1, 0.3, 60)
    cur_vals = base_vals - rng.uniform(0.0, 0.05, 60)

    def rv(label, vals):
        return RunValues(run_id=label, label=label,
                         values={"mrr": dict(zip(ids, map(float, vals), strict=True))},
                         means={"mrr": float(np.mean(vals))}, directions={"mrr": "higher"})

    absolute = gate(rv("cur", cur_vals), rv("base", base_vals), max_drop=0.5).rows[0]
    relative = gate(rv("cur", cur_vals), rv("base", base_vals), max_drop=0.5, relative=True).rows[0]
    m = float(np.mean(base_vals))
    assert relative.drop == pytest.approx(absolute.drop / m)
    assert (relative.ci_low, relative.ci_high) == pytest.approx((absolute.ci_low / m, absolute.ci_high / m))
    assert relative.ci_low <= -relative.drop <= relative.ci_high


def test_bands_only_where_they_were_defined():
    from ragmeter.analysis.composite import bands_apply

    assert bands_apply("faithfulness", "llm") and bands_apply("my_metric", "")
    assert not bands_apply("precision@5", "retrieval") and not bands_apply("bleu", "lexical")
    assert bands_apply("precision@5", "retrieval", {"bands": ["precision"]})
    assert bands_apply("bleu", "lexical", {"bands": "bleu,chrf"})


def test_report_shows_no_band_for_retrieval_precision(tmp_path):
    from ragmeter.apps.report.data import run_view
    from ragmeter.store import Store

    url = f"sqlite:///{tmp_path}/b.db"
    rows = [{"question": f"q{i}", "answer": "a", "reference": "a",
             "contexts": ["x", "y", "z", "w", "v"], "relevant": ["x"] if i % 5 == 0 else ["v"]}
            for i in range(20)]
    rid = ragmeter.evaluate(rows, ["precision@5", "exact_match"], db=url).run_id
    view = run_view(Store(url), rid)
    assert all(m["band"] is None for m in view["metrics"])
