"""Intervals and paired tests of clustered values (the assistant turns of conversations), checked
against statsmodels' cluster-robust OLS and against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.analysis.compare import compare_runs
from ragmeter.analysis.gate import gate
from ragmeter.analysis.runs import RunValues, cluster_labels, load_baseline, save_baseline
from ragmeter.stats.clustered import cluster_mean_ci
from ragmeter.stats.paired import (
    CLUSTERED_WILCOXON_NOTE,
    cluster_paired_mean_ci,
    cluster_permutation_test,
    compare_paired,
    paired_permutation_test,
)
from references import require_reference


def clustered(rng, g, max_size=7):
    sizes = rng.integers(1, max_size + 1, g)
    labels = np.repeat([f"conversación-{i}" for i in range(g)], sizes)  # unicode labels
    return labels.tolist(), int(sizes.sum())


@pytest.mark.contract
@pytest.mark.parametrize("seed", range(12))
def test_cluster_interval_equals_statsmodels_cluster_robust_ols(seed):
    sm = require_reference("statsmodels.api")
    rng = np.random.default_rng(seed)
    labels, n = clustered(rng, int(rng.integers(2, 40)))
    effect = {c: rng.normal(0, 0.2) for c in set(labels)}
    y = np.array([0.5 + effect[c] + rng.normal(0, 0.1) for c in labels])
    codes = np.unique(labels, return_inverse=True)[1]
    fit = sm.OLS(y, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    for level in (0.9, 0.95, 0.99):
        lo, hi = fit.conf_int(1 - level)[0]
        got = cluster_mean_ci(y, labels, level=level)
        assert got == pytest.approx((lo, hi), rel=1e-10, abs=1e-12)


def test_cluster_interval_edges():
    assert cluster_mean_ci([0.2, 0.4], ["a", "a"]) is None  # one cluster: no interval
    assert cluster_mean_ci([], []) is None
    assert cluster_mean_ci([np.nan, np.nan, 1.0], ["a", "b", "b"]) is None  # one cluster with a value
    lo, hi = cluster_mean_ci([1.0, np.nan, 0.0, 1.0], ["a", "a", "b", "c"], bounds=(0, 1))
    assert 0.0 <= lo <= 2 / 3 <= hi <= 1.0
    assert cluster_mean_ci([0.5] * 6, list("aabbcc")) == (0.5, 0.5)  # no spread: a point
    with pytest.raises(Exception, match="cluster labels"):
        cluster_mean_ci([1.0, 2.0], ["a"])


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.integers(0, 5)), min_size=1, max_size=14))
@settings(max_examples=60, deadline=None)
def test_cluster_sign_flip_test_equals_brute_force(rows):
    a = [r[0] for r in rows]
    b = [r[1] for r in rows]
    labels = [f"c{r[2]}" for r in rows]
    got = cluster_permutation_test(a, b, labels)
    sums = {}
    for x, y, c in zip(a, b, labels, strict=True):
        sums[c] = sums.get(c, 0.0) + (y - x)
    d = np.array(list(sums.values()))
    obs = abs(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d[d != 0]).sum()) if np.any(d != 0) else 1.0)
    flips = list(itertools.product((-1.0, 1.0), repeat=d.size))
    want = sum(abs(float(np.dot(s, d))) >= obs - tol for s in flips) / len(flips)
    assert got.exact and got.pvalue == pytest.approx(want, abs=1e-12)
    assert got.statistic == pytest.approx(float(np.mean(np.subtract(b, a))))


def test_one_turn_per_conversation_is_the_ordinary_paired_test():
    rng = np.random.default_rng(5)
    a, b = rng.random(60), rng.random(60)
    labels = [f"c{i}" for i in range(60)]
    for alt in ("two-sided", "less", "greater"):
        assert cluster_permutation_test(a, b, labels, alternative=alt).pvalue == \
            paired_permutation_test(a, b, alternative=alt).pvalue


def test_clustered_comparison_is_wider_and_says_why():
    rng = np.random.default_rng(11)
    labels, n = clustered(rng, 12)
    shift = {c: rng.normal(0, 0.15) for c in set(labels)}  # whole conversations move together
    a = rng.uniform(0.3, 0.7, n)
    b = np.clip(a + np.array([shift[c] for c in labels]) + rng.normal(0, 0.01, n), 0, 1)
    plain = compare_paired(a, b, bounds=(0, 1))
    clust = compare_paired(a, b, bounds=(0, 1), clusters=labels)
    assert clust.diff == plain.diff and clust.n == plain.n
    assert clust.n_clusters == 12 and plain.n_clusters is None
    assert clust.ci_high - clust.ci_low > plain.ci_high - plain.ci_low
    assert clust.pvalue > plain.pvalue
    assert clust.wilcoxon_pvalue is None and clust.wilcoxon_note == CLUSTERED_WILCOXON_NOTE
    assert cluster_paired_mean_ci(a, b, labels, bounds=(0, 1)) == (clust.ci_low, clust.ci_high)


def test_false_alarms_stay_near_alpha_when_conversations_move_together():
    """No real difference, but each conversation's turns share a random shift: the test that
    treats turns as independent cries "significant" far more often than 5%; the clustered one does
    not (benchmarks/clustered.py measures it at scale)."""
    rng = np.random.default_rng(2026)
    plain = clust = 0
    trials = 300
    for _ in range(trials):
        labels, n = clustered(rng, 15, max_size=8)
        shift = {c: rng.normal(0, 0.2) for c in set(labels)}
        d = np.array([shift[c] for c in labels]) + rng.normal(0, 0.02, n)
        a = np.full(n, 0.5)
        plain += paired_permutation_test(a, a + d, n_resamples=500).pvalue < 0.05
        clust += cluster_permutation_test(a, a + d, labels, n_resamples=500).pvalue < 0.05
    assert plain / trials > 0.3
    assert clust / trials < 0.09


def runs_of_turns():
    rng = np.random.default_rng(8)
    convs = {f"conv{i}": int(rng.integers(2, 6)) for i in range(10)}
    ids = [f"{c}#t{k}" for c, k_n in convs.items() for k in range(1, 2 * k_n, 2)]
    clusters = {i: i.split("#")[0] for i in ids}
    shift = {c: rng.normal(0, 0.2) for c in convs}
    va = {i: float(rng.uniform(0.3, 0.7)) for i in ids}
    vb = {i: float(np.clip(va[i] + shift[clusters[i]] + 0.02, 0, 1)) for i in ids}
    conv_a = {c: 0.8 for c in convs}
    conv_b = {c: 0.6 for c in convs}
    a = RunValues("a", values={"token_f1": va, "role_adherence": conv_a}, directions={"token_f1": "higher"},
                  label="a", clusters=clusters, ranges={"token_f1": (0.0, 1.0), "role_adherence": (0.0, 1.0)})
    b = RunValues("b", values={"token_f1": vb, "role_adherence": conv_b}, directions={"token_f1": "higher"},
                  label="b", clusters=clusters, ranges={"token_f1": (0.0, 1.0), "role_adherence": (0.0, 1.0)})
    return a, b, len(convs), len(ids)


def test_compare_runs_pairs_turns_per_conversation_and_conversations_as_usual():
    a, b, g, n = runs_of_turns()
    rows = {r.metric: r for r in compare_runs([a, b]).rows}
    f1, role = rows["token_f1"], rows["role_adherence"]
    assert (f1.n, f1.n_clusters) == (n, g)
    assert f1.note == f"{n} turns of {g} conversations: interval and test per conversation"
    assert f1.wilcoxon_pvalue is None
    xa = np.array(list(a.values["token_f1"].values()))
    xb = np.array(list(b.values["token_f1"].values()))
    want = compare_paired(xa, xb, bounds=(0, 1), clusters=[i.split("#")[0] for i in a.values["token_f1"]])
    assert (f1.ci_low, f1.ci_high, f1.pvalue) == (want.ci_low, want.ci_high, want.pvalue)
    # a conversation metric has one value per conversation: nothing to cluster
    assert role.n == g and role.n_clusters is None and role.wilcoxon_note != CLUSTERED_WILCOXON_NOTE


def test_gate_tests_turns_per_conversation_and_a_baseline_file_keeps_the_clusters(tmp_path):
    a, b, g, n = runs_of_turns()
    path = save_baseline(a, tmp_path / "base.json")
    back = load_baseline(path)
    assert back.clusters == a.clusters
    res = gate(b, path, max_drop=0.0, metrics=["token_f1"])
    row = res.rows[0]
    assert f"{n} turns of {g} conversations: tested per conversation" in row.note
    xa = np.array(list(a.values["token_f1"].values()))
    xb = np.array(list(b.values["token_f1"].values()))
    labels = cluster_labels(a.clusters, list(a.values["token_f1"]))
    assert row.pvalue == cluster_permutation_test(xa, xb, labels, alternative="less").pvalue
    lo, hi = cluster_paired_mean_ci(xa, xb, labels, bounds=(0, 1))
    assert (row.ci_low, row.ci_high) == (lo, hi)


def test_a_baseline_file_with_bad_clusters_names_the_field(tmp_path):
    p = tmp_path / "b.json"
    p.write_text('{"metrics": {"m": {"values": {"s": 0.5}}}, "clusters": {"s": 3}}')
    with pytest.raises(Exception, match="'clusters' must map sample ids"):
        load_baseline(p)


def test_cluster_labels_give_a_lone_sample_its_own_cluster():
    assert cluster_labels({"c#t1": "c"}, ["c#t1", "x"]) == ["c", "sample:x"]
    assert cluster_labels({"c#t1": "c"}, ["x", "y"]) is None
    assert cluster_labels(None, ["x"]) is None
