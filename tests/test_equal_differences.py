"""Two runs with the same values: every paired difference is 0, and every path that shows the
difference's interval (``compare``, ``gate`` against a run and against a baseline file, the report's
comparison in both of its builders, the dashboard's ``/api/compare``, the CLI's ``--json``) gives
the interval docs/statistics.md describes for all-zero differences, ``[-pi, pi]`` with
``pi = 1 - (alpha/2)^(1/n)`` on [-1, 1], never a zero-width ``[0, 0]``: ``n`` is the number of
pairs for a per-sample metric and for a conversation metric, the number of conversations for a
per-turn metric (its turns are compared per conversation).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from cli_runner import run_main
from judge_server import judge_options, server_fixtures
from ragmeter.analysis.compare import compare_runs
from ragmeter.analysis.gate import gate
from ragmeter.analysis.runs import load_runs, save_baseline
from ragmeter.apps.report import columnar, data, differences
from ragmeter.apps.report.render import write_report
from ragmeter.apps.server import create_app
from ragmeter.conversations.scope import cluster_ci
from ragmeter.run.runner import evaluate
from ragmeter.stats.clustered import cluster_interval
from ragmeter.stats.paired import compare_paired, paired_mean_ci
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()


def pi(n: int, level: float = 0.95) -> float:
    """The documented half-width of the interval of ``n`` differences that are all 0."""
    return 1.0 - ((1.0 - level) / 2) ** (1.0 / n)


@pytest.fixture
def twin_runs(server, tmp_path, monkeypatch):
    """Two identical conversation runs (a conversation metric, a per-turn metric) and two
    identical plain runs (a per-sample metric), in one store."""
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    url = f"sqlite:///{tmp_path / 'twins.db'}"
    opts = judge_options(server)
    chat = [evaluate("example-chat", ["role_adherence", "token_f1"], db=url, options=opts, name=f"chat {x}")
            for x in "ab"]
    plain = [evaluate("example", ["token_f1"], db=url, name=f"plain {x}") for x in "ab"]
    store = open_store(url)
    values = {k: [load_runs(r.run_id, store) for r in runs] for k, runs in (("chat", chat), ("plain", plain))}
    for a, b in values.values():  # the premise: identical values, so every difference is 0
        for m in a.values:
            assert a.values[m] == b.values[m] and any(v is not None for v in a.values[m].values())
    n_conv = sum(v is not None for v in values["chat"][0].values["role_adherence"].values())
    n_turns = sum(v is not None for v in values["chat"][0].values["token_f1"].values())
    n_plain = sum(v is not None for v in values["plain"][0].values["token_f1"].values())
    assert n_turns > n_conv >= 10 and n_plain >= 10
    # metric -> (run ids, documented half-width)
    want = {"role_adherence": ([r.run_id for r in chat], pi(n_conv)),
            "token_f1 per turn": ([r.run_id for r in chat], pi(n_conv)),
            "token_f1": ([r.run_id for r in plain], pi(n_plain))}
    return url, store, want, tmp_path


def _check(ci_low, ci_high, half, where):
    assert ci_low is not None and ci_high is not None, where
    assert (ci_low, ci_high) == pytest.approx((-half, half), abs=1e-12), where
    assert ci_high - ci_low > 0.05, where  # never the zero-width [0, 0]


def _metric(key, run_ids, want):
    """The ``want`` entry of metric ``key`` compared between ``run_ids``."""
    for label, (ids, half) in want.items():
        if label.split(" ")[0] == key and ids == run_ids:
            return label, half
    raise AssertionError((key, run_ids))


def test_all_zero_differences_get_the_documented_interval_on_every_path(twin_runs, monkeypatch):
    url, store, want, tmp_path = twin_runs
    # the per-turn metric's interval is the conversation metric's: the same conversations
    assert want["token_f1 per turn"][1] == want["role_adherence"][1] != want["token_f1"][1]
    for (a, b) in {tuple(ids) for ids, _ in want.values()}:
        # compare (Python)
        for row in compare_runs([a, b], store=store).rows:
            label, half = _metric(row.metric, [a, b], want)
            assert row.diff == 0 and row.verdict == "no significant difference"
            _check(row.ci_low, row.ci_high, half, f"compare {label}")
            assert (row.n_clusters is not None) == (label == "token_f1 per turn")
        # gate against the run and against a baseline file (which keeps the conversations)
        path = save_baseline(load_runs(a, store), tmp_path / f"{a}.json")
        for base in (a, str(path)):
            res = gate(b, base, max_drop=0.0, store=store)
            assert not res.failed
            for row in res.rows:
                label, half = _metric(row.metric, [a, b], want)
                assert row.status == "ok"
                _check(row.ci_low, row.ci_high, half, f"gate {label} against {base}")
        # the report's comparison: the per-run builder, the bulk one of large runs, and the
        # builder without a p-value (more pairs than MAX_PAIRS_FOR_PVALUE)
        views = {"report": data.compare_view(store, [a, b]),
                 "report (large runs)": columnar.compare_view(store, [store.get_run(a), store.get_run(b)], 10)}
        with monkeypatch.context() as mp:
            mp.setattr(differences, "MAX_PAIRS_FOR_PVALUE", 0)
            views["report (no p-value)"] = data.compare_view(store, [a, b])
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        r = client.get("/api/compare", params={"runs": f"{a},{b}"})
        assert r.status_code == 200, r.text
        views["dashboard /api/compare"] = r.json()
        for where, view in views.items():
            assert {d["metric"] for d in view["differences"]} == {k.split(" ")[0] for k, (ids, _) in want.items()
                                                                 if ids == [a, b]}
            for d in view["differences"]:
                label, half = _metric(d["metric"], [a, b], want)
                assert d["diff"] == 0 and d["verdict"] == "no significant difference", where
                _check(d["ci_low"], d["ci_high"], half, f"{where} {label}")
                assert (d["n_clusters"] is not None) == (label == "token_f1 per turn"), where
        html = write_report(store, [a, b], tmp_path / f"{a}.html").read_text(encoding="utf-8")
        for key in {k.split(" ")[0] for k, (ids, _) in want.items() if ids == [a, b]}:
            half = _metric(key, [a, b], want)[1]
            assert f"[{-half:+.4f}, {half:+.4f}]" in html
        assert "[0.0000, 0.0000]" not in html
        # the command line
        code, out, err = run_main("compare", a, b, "--json", "--db", url)
        assert code == 0, out + err
        for row in json.loads(out)["comparisons"]:
            label, half = _metric(row["metric"], [a, b], want)
            _check(row["ci_low"], row["ci_high"], half, f"ragmeter compare --json {label}")
        code, out, err = run_main("gate", b, "--baseline", a, "--max-drop", "0", "--json", "--db", url)
        assert code == 0, out + err
        for row in json.loads(out)["rows"]:
            label, half = _metric(row["metric"], [a, b], want)
            _check(row["ci_low"], row["ci_high"], half, f"ragmeter gate --json {label}")


@pytest.mark.parametrize("value", [0.0, 0.25, 1.0])
def test_equal_values_clustered_or_not_give_one_interval(value):
    """The rule under every path: G clusters of equal values (any number of turns each) get the
    interval of G equal values; equal differences likewise, on the difference's range."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 8, 12)
    labels = [f"c{g}" for g, k in enumerate(sizes) for _ in range(k)]
    x = np.full(len(labels), value)
    plain = paired_mean_ci(np.zeros(12), np.full(12, value), bounds=(0, 1))
    clustered = paired_mean_ci(np.zeros(len(labels)), x, bounds=(0, 1), clusters=labels)
    assert clustered == pytest.approx(plain) and plain[1] - plain[0] > 0.2
    assert compare_paired(np.zeros(len(labels)), x, bounds=(0, 1), clusters=labels).ci_low == \
        pytest.approx(plain[0])
    # a run mean of a per-turn metric whose turns are all equal (the run summary's interval)
    lo, hi, method = cluster_interval(x, labels, bounds=(0, 1))
    from ragmeter.stats.intervals import mean_ci

    assert (lo, hi) == pytest.approx(mean_ci(np.full(12, value), bounds=(0, 1)))
    assert method == ("clopper_pearson" if value in (0.0, 1.0) else "constant")
    assert cluster_ci(x, labels, bounds=(0, 1))["ci_method"] == method
    # differences that vary within conversations but sum to 0 in each: the conversations are
    # equal (the sandwich variance is 0), so the interval is that of 12 equal differences
    pairs = np.array([0.5, -0.5] * 12)
    both = [f"c{g}" for g in range(12) for _ in range(2)]
    assert paired_mean_ci(np.zeros(24), pairs, bounds=(0, 1), clusters=both) == pytest.approx((-pi(12), pi(12)))


def test_clustered_interval_covers_when_whole_conversations_are_unchanged():
    """Most conversations unchanged, a few changed in every turn (+1 or -1 per turn, slightly more
    often +1): with 8 conversations about a sixth of the comparisons see no change at all. The
    interval must still cover the true mean difference (a zero-width [0, 0] never does);
    benchmarks/clustered.py measures it at scale."""
    rng = np.random.default_rng(2026)
    g, reps, p_change, p_up = 8, 600, 0.2, 0.6
    true = p_change * (2 * p_up - 1)
    covered = all_zero = 0
    for _ in range(reps):
        sizes = rng.integers(1, 9, g)
        labels = np.repeat(np.arange(g), sizes)
        changed = rng.random(g) < p_change
        sign = np.where(rng.random(g) < p_up, 1.0, -1.0)
        d = np.where(changed[labels], sign[labels], 0.0)
        all_zero += not d.any()
        lo, hi = paired_mean_ci(np.zeros(d.size), d, bounds=(0, 1), clusters=[f"c{v}" for v in labels])
        covered += lo <= true <= hi
    assert all_zero / reps > 0.1  # the premise: many comparisons with no change at all
    assert covered / reps >= 0.93
