"""Confidence intervals of means (ragmeter.stats) and the shared verdict rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

import ragmeter
from ragmeter import stats
from ragmeter.experiments.statistics import family_verdicts, holm, verdict


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


def test_bca_close_to_scipy():
    x = np.random.default_rng(3).beta(2, 5, 150)
    ours = stats.mean_ci(x, n_resamples=20_000)
    ref = bootstrap((x,), np.mean, method="BCa", n_resamples=20_000, random_state=1).confidence_interval
    assert stats.choose_method(x) == "bca"
    assert ours == pytest.approx((ref.low, ref.high), abs=0.004)


def test_small_n_uses_bootstrap_t_and_is_wider_than_percentile():
    x = np.random.default_rng(4).beta(5, 1, 10)
    assert stats.choose_method(x) == "bootstrap_t"
    lo, hi = stats.mean_ci(x)
    plo, phi = stats.bootstrap_ci(x)
    assert lo < x.mean() < hi and hi - lo > phi - plo


def test_constant_and_tiny_inputs():
    assert stats.mean_ci([]) is None
    assert stats.mean_ci([0.5]) is None
    assert stats.mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert stats.mean_ci([1.0])[0] == pytest.approx(0.025)  # one pass: Clopper-Pearson is defined


def test_verdict_rule():
    assert verdict(0.1, 0.01) == "better" and verdict(0.1, 0.01, higher_is_better=False) == "worse"
    assert verdict(0.1, 0.06) == "no significant difference"
    assert verdict(0.0, 0.0) == "no significant difference"
    p = [0.028, 0.3, 0.5, 0.6, 0.7, 0.9]
    decided = family_verdicts([(0.1, q, True) for q in p])
    assert [d[0] for d in decided] == pytest.approx(holm(p).tolist())
    assert decided[0][1] == "no significant difference"  # 0.028 x 6 = 0.168


def test_report_verdict_equals_compare_winner(tmp_path):
    from ragmeter.experiments.compare import compare_runs
    from ragmeter.report.data import compare_view
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
    from ragmeter.experiments.gate import gate
    from ragmeter.experiments.runs import RunValues

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
    from ragmeter.metrics.composite import bands_apply

    assert bands_apply("faithfulness", "llm") and bands_apply("my_metric", "")
    assert not bands_apply("precision@5", "retrieval") and not bands_apply("bleu", "lexical")
    assert bands_apply("precision@5", "retrieval", {"bands": ["precision"]})
    assert bands_apply("bleu", "lexical", {"bands": "bleu,chrf"})


def test_report_shows_no_band_for_retrieval_precision(tmp_path):
    from ragmeter.report.data import run_view
    from ragmeter.store import Store

    url = f"sqlite:///{tmp_path}/b.db"
    rows = [{"question": f"q{i}", "answer": "a", "reference": "a",
             "contexts": ["x", "y", "z", "w", "v"], "relevant": ["x"] if i % 5 == 0 else ["v"]}
            for i in range(20)]
    rid = ragmeter.evaluate(rows, ["precision@5", "exact_match"], db=url).run_id
    view = run_view(Store(url), rid)
    assert all(m["band"] is None for m in view["metrics"])
