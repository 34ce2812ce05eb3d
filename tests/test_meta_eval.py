"""``ragmeter meta-eval``: the agreement statistics against scipy and scikit-learn (values and every
bootstrap resample), the readers of pointwise and pairwise files (ragas, DeepEval, RAGChecker
layouts, raters as columns, objects, lists, long rows), malformed files, the bundled example-human,
stored results and their comparison, judge metrics through the judge client, and the report."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau, pearsonr, spearmanr
from typer.testing import CliRunner

import ragmeter
from judge_server import judge_options, server_fixtures
from ragmeter.analysis.meta_eval import statistics as S
from ragmeter.analysis.meta_eval.reader import read_labels
from ragmeter.apps.cli import app
from ragmeter.core.errors import DatasetError
from ragmeter.metrics.lexical import token_f1
from references import require_reference

runner = CliRunner()
judge_server_module, server = server_fixtures()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tf1(answer, reference):
    return token_f1(answer, reference)


# ---- statistics ---------------------------------------------------------------------------------

def _data(rng, n, ties=True):
    x = rng.random(n)
    y = x + rng.normal(0, 0.4, n)
    if ties:
        x, y = np.round(x, 1), np.round(y * 2) / 2
    return x, y


@pytest.mark.parametrize("ties", [True, False])
def test_every_resample_equals_scipy_on_the_expanded_arrays(ties):
    rng = np.random.default_rng(5)
    x, y = _data(rng, 40, ties)
    w = S.Resamples.draw(40, 60, seed=2).counts
    boots = S.boot_correlations(x, y, w)
    for b in range(60):
        xe, ye = np.repeat(x, w[b]), np.repeat(y, w[b])
        assert boots["pearson"][b] == pytest.approx(pearsonr(xe, ye).statistic, abs=1e-12)
        assert boots["spearman"][b] == pytest.approx(spearmanr(xe, ye).statistic, abs=1e-12)
        assert boots["kendall"][b] == pytest.approx(kendalltau(xe, ye).statistic, abs=1e-12)


def test_kendall_resamples_of_many_items_go_through_scipy(monkeypatch):
    rng = np.random.default_rng(6)
    x, y = _data(rng, 50)
    w = S.Resamples.draw(50, 20, seed=1).counts
    matrix = S._wkendall(x, y, w)
    monkeypatch.setattr(S, "_KENDALL_MATRIX_MAX", 10)
    assert S._wkendall(x, y, w) == pytest.approx(matrix, abs=1e-12)


def test_correlations_are_scipys_with_an_interval_around_them():
    rng = np.random.default_rng(8)
    x, y = _data(rng, 120)
    out = S.correlations(x, y, S.Resamples.draw(120, 500).counts)
    for name, fn in (("pearson", pearsonr), ("spearman", spearmanr), ("kendall", kendalltau)):
        ref = fn(x, y)
        assert out[name]["value"] == ref.statistic
        assert out[name]["p_value"] == pytest.approx(ref.pvalue)
        assert out[name]["ci_low"] < out[name]["value"] < out[name]["ci_high"]
    assert S.correlations(x, y, None)["kendall"]["ci_low"] is None


@pytest.mark.parametrize("x, y, why", [
    ([0.1, 0.2], [1, 2], "2 items"),
    ([0.5, 0.5, 0.5, 0.5], [1, 2, 3, 4], "the metric has the same value"),
    ([0.1, 0.2, 0.3], [2, 2, 2], "the human label has the same value"),
])
def test_undefined_correlations_say_why_and_never_zero(x, y, why):
    out = S.correlations(np.array(x, float), np.array(y, float), None)
    for name in S.CORRELATIONS:
        assert out[name]["value"] is None and why in out[name]["undefined"]


@pytest.mark.contract
def test_auroc_and_cross_validated_f1_against_scikit_learn():
    sk_metrics = require_reference("sklearn.metrics")
    f1_score, roc_auc_score = sk_metrics.f1_score, sk_metrics.roc_auc_score

    rng = np.random.default_rng(9)
    truth = rng.random(200) < 0.4
    score = np.round(np.clip(truth * 0.3 + rng.random(200) * 0.7, 0, 1), 2)
    w = S.Resamples.draw(200, 50).counts
    a = S.auroc(score, truth, w)
    assert a["value"] == pytest.approx(roc_auc_score(truth, score))
    wranks = S._wranks(score, w)
    for b in range(50):  # every resample too
        te, se = np.repeat(truth, w[b]), np.repeat(score, w[b])
        wf = w[b].astype(float)
        wp, wn = wf[truth].sum(), wf[~truth].sum()
        got = ((wf[truth] * wranks[b, truth]).sum() - wp * (wp + 1) / 2) / (wp * wn)
        assert got == pytest.approx(roc_auc_score(te, se))
    t, f1 = S.best_threshold(score, truth)
    brute = max((f1_score(truth, score >= c), -c) for c in np.unique(score))
    assert f1 == pytest.approx(brute[0]) and t == pytest.approx(-brute[1])
    cv = S.cv_f1(score, truth, w)
    assert 0 < cv["value"] <= f1 + 1e-12 and cv["folds"] == 5 and cv["threshold"] == t
    assert S.auroc(score, np.zeros(200, bool), None)["undefined"] == "one class only"
    lower = S.cv_f1(1 - score, truth, None, higher_is_better=False)
    assert lower["value"] == pytest.approx(cv["value"])


def test_pairwise_accuracy_counts_ties_as_deutsch_et_al():
    diff = np.array([0.3, -0.2, 0.0, 0.05, -0.01, 0.0])
    pref = np.array([1.0, -2.0, 0.0, 0.0, 0.0, 1.0])
    out = S.pairwise_accuracy(diff, pref, None)
    # exact ties: agree on items 0, 1, 2 (a metric tie meets a human tie); 3, 4 (metric prefers, humans tie), 5 (metric ties) do not
    assert out["pairwise_accuracy"]["value"] == pytest.approx(3 / 6)
    cal = out["pairwise_accuracy_tie_calibrated"]
    # |diff| <= 0.05 counts as a tie: items 0, 1, 2, 3, 4 agree
    assert cal["value"] == pytest.approx(5 / 6) and cal["epsilon"] == pytest.approx(0.05)


def test_human_ceiling_is_rater_against_rater_and_one_against_the_rest():
    rng = np.random.default_rng(4)
    truth = rng.random(60)
    ratings = np.stack([np.round(truth * 4 + rng.normal(0, 0.7, 60)) for _ in range(3)], axis=1)
    ratings[::5, 2] = np.nan  # rater 3 skipped some items
    w = S.Resamples.draw(60, 200).counts
    c = S.human_ceiling(ratings, ["a", "b", "c"], w)
    pairs = [(0, 1), (0, 2), (1, 2)]
    vals, ns = [], []
    for a, b in pairs:
        ok = ~np.isnan(ratings[:, a]) & ~np.isnan(ratings[:, b])
        vals.append(kendalltau(ratings[ok, a], ratings[ok, b]).statistic)
        ns.append(ok.sum())
    assert c["rater_vs_rater"]["kendall"]["value"] == pytest.approx(np.average(vals, weights=ns))
    loo, ns = [], []
    for r in range(3):
        others = np.delete(ratings, r, axis=1)
        ok = ~np.isnan(ratings[:, r])
        loo.append(pearsonr(ratings[ok, r], np.nanmean(others[ok], axis=1)).statistic)
        ns.append(ok.sum())
    assert c["leave_one_out"]["pearson"]["value"] == pytest.approx(np.average(loo, weights=ns))
    assert c["rater_vs_rater"]["pearson"]["ci_low"] < c["rater_vs_rater"]["pearson"]["ci_high"]
    assert c["n_raters"] == 3 and len(c["pairs"]) == 3
    assert S.human_ceiling(ratings[:, :1], ["a"], w) is None


# ---- reading --------------------------------------------------------------------------------------

def test_pointwise_layouts_give_the_same_items_and_ratings(tmp_path):
    base = [{"id": f"i{k}", "question": f"q{k}", "answer": f"a {k}", "reference": f"a {k} b"} for k in range(3)]
    scores = [(1, 2), (3, 3), (5, 4)]
    wide = write_jsonl(tmp_path / "wide.jsonl", [{**r, "r1": s[0], "r2": s[1]} for r, s in zip(base, scores, strict=True)])
    obj = write_jsonl(tmp_path / "obj.jsonl", [{**r, "human": {"r1": s[0], "r2": s[1]}} for r, s in zip(base, scores, strict=True)])
    lst = write_jsonl(tmp_path / "list.jsonl", [{**r, "human": list(s)} for r, s in zip(base, scores, strict=True)])
    long = write_jsonl(tmp_path / "long.jsonl", [{**r, "rater": f"r{j + 1}", "human": s[j]}
                                                 for r, s in zip(base, scores, strict=True) for j in range(2)])
    order = write_jsonl(tmp_path / "order.jsonl", [{**r, "human": s[j]} for r, s in zip(base, scores, strict=True) for j in range(2)])
    csv = tmp_path / "wide.csv"
    csv.write_text("id,question,answer,reference,r1,r2\n" + "".join(
        f"{r['id']},{r['question']},{r['answer']},{r['reference']},{s[0]},{s[1]}\n" for r, s in zip(base, scores, strict=True)))
    expected = np.array(scores, dtype=float)
    for path, label in ((wide, "r1,r2"), (obj, None), (lst, None), (long, None), (order, None), (csv, "r1,r2")):
        h = read_labels(path, label=label)
        assert h.items == ["i0", "i1", "i2"], path
        assert np.array_equal(h.ratings, expected), path
        assert [s.answer for s in h.samples] == ["a 0", "a 1", "a 2"]
        assert h.human.tolist() == [1.5, 3.0, 4.5]
    assert read_labels(long).raters == ["r1", "r2"] and read_labels(long).rater_layout == "rater column"
    assert read_labels(order).rater_layout == "row order"


def test_ragas_and_deepeval_shapes_read_with_a_label_column(tmp_path):
    ragas = write_jsonl(tmp_path / "ragas.jsonl", [
        {"user_input": "Capital?", "response": "Paris", "reference": "Paris", "retrieved_contexts": ["Paris is..."],
         "human_score": 1.0},
        {"user_input": "River?", "response": "Nile", "reference": "Seine", "retrieved_contexts": ["x"],
         "human_score": 0.0}])
    h = read_labels(ragas)
    assert h.label == "human_score" and h.samples[0].question == "Capital?" and h.samples[0].contexts[0].text
    deepeval = tmp_path / "deepeval.json"
    deepeval.write_text(json.dumps({"test_cases": [
        {"input": "Capital?", "actual_output": "Paris", "expected_output": "Paris", "retrieval_context": ["P"],
         "score": 5},
        {"input": "River?", "actual_output": "Nile", "expected_output": "Seine", "retrieval_context": ["R"],
         "score": 1}]}))
    d = read_labels(deepeval)
    assert d.label == "score" and d.samples[1].answer == "Nile" and d.samples[1].references == ["Seine"]
    assert d.binary is False and read_labels(ragas).binary is True


def test_pairwise_layouts(tmp_path):
    rows = [{"instance_id": 7, "query": "q", "gt_answer": "ref", "model1": {"model_name": "x", "response": "A1"},
             "model2": {"response": "B1"}, "overall_label": 2, "correctness_label": 1}]
    rows.append({**rows[0], "overall_label": 1})
    h = read_labels(write_jsonl(tmp_path / "rc.jsonl", rows), pairwise=True, label="overall_label")
    assert h.items == ["7"] and h.raters == ["rater1", "rater2"] and h.human.tolist() == [1.5]
    assert [s.id for s in h.samples] == ["7::A", "7::B"] and h.samples[1].answer == "B1"
    assert h.samples[0].references == ["ref"] and h.samples[0].question == "q"
    ab = write_jsonl(tmp_path / "ab.jsonl", [
        {"id": "p1", "question": "q", "answer_a": "x", "answer_b": "y", "winner": "B"},
        {"id": "p2", "question": "q", "answer_a": "x", "answer_b": "y", "winner": "tie"},
        {"id": "p3", "question": "q", "answer_a": "x", "answer_b": "y", "winner": "model1"}])
    assert read_labels(ab, pairwise=True).human.tolist() == [1.0, 0.0, -1.0]
    mapped = write_jsonl(tmp_path / "m.jsonl", [{"id": "p1", "question": "q", "left": "x", "right": "y", "pref": -1}])
    m = read_labels(mapped, pairwise=True, label="pref", mapping=["answer_a=left", "answer_b=right"])
    assert [s.answer for s in m.samples] == ["x", "y"]


@pytest.mark.parametrize("content, args, words", [
    ('{"id": "a", "answer": "x", "reference": "y", "human": 1}\n{"id": "b", "answer": "x"\n', [],
     ["line 2", "invalid JSON"]),
    ('{"id": "a", "answer": "x", "reference": "y", "human": "high"}\n', [], ["line 1", "field 'human'", "high"]),
    ('{"id": "a", "answer": "x", "reference": "y", "human": {"r1": [1]}}\n', [], ["line 1", "human.r1"]),
    ('{"id": "a", "answer": "x", "reference": "y", "grade": 1}\n', [], ["line 1", "--label"]),
    ('{"id": "a", "answer": "x", "reference": "y", "human": 1}\n', ["--label", "nope"], ["line 1", "'nope'"]),
    ('{"id": "a", "answer": "x", "reference": "y", "human": null}\n', [], ["line 1", "no human label"]),
    ('{"id": "a", "answer": "x", "rater": "r1", "human": 1}\n{"id": "a", "answer": "z", "rater": "r2", "human": 1}\n',
     [], ["line 2", "field 'answer'", "differ"]),
    ('{"id": "a", "answer": "x", "rater": "r1", "human": 1}\n{"id": "a", "answer": "x", "rater": "r1", "human": 2}\n',
     [], ["line 2", "twice"]),
    ('{"id": "a", "answer": "x", "rater": "r1", "human": 1}\n{"id": "b", "answer": "x", "human": 2}\n',
     [], ["line 2", "rater"]),
    ('[1, 2]\n', [], ["line 1", "object"]),
    ('', [], ["no rows"]),
    ('{"id": "a", "answer": "x", "human": Infinity}\n', [], ["line 1", "finite"]),
    ('{"instance_id": 1, "query": "q", "model1": "x", "overall_label": 1}\n', ["--pairwise"], ["line 1", "model1/model2"]),
    ('{"instance_id": 1, "model1": {"name": "m"}, "model2": "y", "overall_label": 1}\n', ["--pairwise"],
     ["line 1", "field 'model1'", "response"]),
    ('{"instance_id": 1, "model1": "x", "model2": "y", "overall_label": "B+"}\n', ["--pairwise"],
     ["line 1", "overall_label", "A, B or tie"]),
    ('{"id": "a", "answer": "x", "human": 1}\n', ["--map", "answer_a=x"], ["--pairwise"]),
])
def test_malformed_files_exit_2_naming_file_line_and_field(tmp_path, content, args, words):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    r = invoke("meta-eval", f, "--metrics", "token_f1", "--db", tmp_path / "x.db", *args)
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert all(w in text for w in words), text
    assert "Traceback" not in r.output


def test_bad_arguments_and_missing_files_exit_2(tmp_path):
    good = write_jsonl(tmp_path / "g.jsonl", [{"id": f"i{k}", "answer": "a", "reference": "a b", "human": k}
                                              for k in range(4)])
    db = tmp_path / "x.db"
    for args in (["--sort", "median"], ["--bootstrap", "-1"], ["--level", "2"], [],
                 ["--metrics", "not_a_metric"], ["--option", "novalue"]):
        r = invoke("meta-eval", good, *(args if args and args[0] == "--metrics" else ["--metrics", "token_f1", *args]
                                         if args else []), "--db", db)
        assert r.exit_code == 2, (args, r.output)
    r = invoke("meta-eval", tmp_path / "absent.jsonl", "--metrics", "token_f1", "--db", db)
    assert r.exit_code == 2 and "absent.jsonl" in r.output
    gz = tmp_path / "broken.jsonl.gz"
    gz.write_bytes(b"not gzip at all")
    r = invoke("meta-eval", gz, "--metrics", "token_f1", "--db", db)
    assert r.exit_code == 2 and "broken.jsonl.gz" in r.output and "gzip" in r.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                          st.text(max_size=6), st.lists(st.integers(0, 3), max_size=3),
                          st.dictionaries(st.text(max_size=3), st.integers(0, 5), max_size=3)), min_size=1, max_size=6),
       st.booleans())
def test_fuzzed_labels_never_crash(tmp_path, labels, pairwise):
    rows = []
    for k, lab in enumerate(labels):
        row = ({"instance_id": k, "query": "q", "gt_answer": "a b", "model1": {"response": "a"},
                "model2": {"response": "b"}, "overall_label": lab} if pairwise
               else {"id": f"i{k}", "answer": "a", "reference": "a b", "human": lab})
        rows.append(row)
    f = tmp_path / "fuzz.jsonl"
    f.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in rows))
    args = ["--pairwise", "--label", "overall_label"] if pairwise else []
    r = runner.invoke(app, ["meta-eval", str(f), "--metrics", "token_f1", "--bootstrap", "20", "--json",
                            "--db", str(tmp_path / "f.db"), *args])
    assert r.exit_code in (0, 2, 3), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code == 2:
        assert "fuzz.jsonl" in r.output


# ---- the command ----------------------------------------------------------------------------------

def test_pointwise_file_equals_scipy(tmp_path):
    rng = np.random.default_rng(0)
    words = "the cat sat on a mat near river bank with dogs".split()
    rows = []
    for k in range(40):
        ref = " ".join(rng.choice(words, 8))
        ans = " ".join(rng.choice(words, int(rng.integers(1, 9))))
        rows.append({"id": f"s{k}", "question": f"q{k}", "answer": ans, "reference": ref,
                     "human": float(np.round(rng.random() * 5, 1))})
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    r = invoke("meta-eval", f, "--label", "human", "--metrics", "token_f1", "--json", "--db", tmp_path / "m.db")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    m = out["metrics"]["token_f1"]
    x = np.array([tf1(row["answer"], row["reference"]) for row in rows])
    y = np.array([row["human"] for row in rows])
    assert m["pearson"]["value"] == pytest.approx(pearsonr(x, y).statistic, abs=1e-12)
    assert m["spearman"]["value"] == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert m["kendall"]["value"] == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
    for s in ("pearson", "spearman", "kendall"):
        assert m[s]["ci_low"] <= m[s]["value"] <= m[s]["ci_high"]
    assert out["human_ceiling"] is None and m["human_ceiling"] is None and out["n_items"] == 40
    text = invoke("meta-eval", f, "--metrics", "token_f1,exact_match,rougeL_fmeasure", "--db", tmp_path / "m.db")
    assert text.exit_code == 0 and "Kendall" in text.output and "one rater" in text.output


def test_pairwise_file_equals_scipy_of_the_difference_against_the_mean_label(tmp_path):
    rng = np.random.default_rng(1)
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    rows, diffs, means = [], [], []
    for k in range(30):
        gt = " ".join(rng.choice(words, 6))
        a, b = " ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 5))
        labels = [int(rng.integers(-2, 3)), int(rng.integers(-2, 3))]
        for lab in labels:
            rows.append({"instance_id": k, "query": f"q{k}", "gt_answer": gt, "model1": {"response": a},
                         "model2": {"response": b}, "overall_label": lab, "correctness_label": 0})
        diffs.append(tf1(b, gt) - tf1(a, gt))
        means.append(np.mean(labels))
    f = write_jsonl(tmp_path / "pairs.jsonl", rows)
    r = invoke("meta-eval", f, "--pairwise", "--label", "overall_label", "--metrics", "token_f1", "--json",
               "--db", tmp_path / "m.db")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    m = out["metrics"]["token_f1"]
    assert m["pearson"]["value"] == pytest.approx(pearsonr(diffs, means).statistic, abs=1e-12)
    assert m["kendall"]["value"] == pytest.approx(kendalltau(diffs, means).statistic, abs=1e-12)
    agree = np.mean(np.sign(np.round(diffs, 12)) == np.sign(means))
    assert m["pairwise_accuracy"]["value"] == pytest.approx(agree)
    ceiling = out["human_ceiling"]
    a1, a2 = [rows[i]["overall_label"] for i in range(0, 60, 2)], [rows[i]["overall_label"] for i in range(1, 60, 2)]
    assert ceiling["rater_vs_rater"]["pearson"]["value"] == pytest.approx(pearsonr(a1, a2).statistic)
    assert out["kind"] == "pairwise" and out["raters"] == ["rater1", "rater2"]


@pytest.mark.contract
def test_binary_labels_add_auroc_and_f1(tmp_path):
    rows = [{"id": f"s{k}", "answer": "paris" if k % 3 else "lyon", "reference": "paris",
             "correct": k % 3 != 0 if k != 4 else False} for k in range(30)]
    f = write_jsonl(tmp_path / "b.jsonl", rows)
    out = json.loads(invoke("meta-eval", f, "--label", "correct", "--metrics", "exact_match", "--json",
                            "--sort", "auroc", "--db", tmp_path / "m.db").output)
    m = out["metrics"]["exact_match"]
    assert out["binary"] is True
    roc_auc_score = require_reference("sklearn.metrics").roc_auc_score

    truth = [float(r["correct"]) for r in rows]
    pred = [1.0 if r["answer"] == "paris" else 0.0 for r in rows]
    assert m["auroc"]["value"] == pytest.approx(roc_auc_score(truth, pred))
    assert {"value", "ci_low", "ci_high", "threshold", "folds"} <= set(m["f1"])


def test_example_human_has_two_or_more_raters_and_a_ceiling(tmp_path):
    h = read_labels("example-human")
    assert len(h.items) == 300 and len(h.raters) == 4
    assert ((~np.isnan(h.ratings)).sum(axis=1) == 3).all()  # each answer rated by three of the four reviewers
    assert all(s.references and s.question and s.answer for s in h.samples)
    assert len(ragmeter.load("example-human")) == 300
    r = invoke("meta-eval", "example-human", "--metrics", "token_f1,rougeL_fmeasure", "--json", "--db",
               tmp_path / "m.db")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in ("token_f1", "rougeL_fmeasure"):
        m = out["metrics"][key]
        for s in ("pearson", "spearman", "kendall"):
            assert {"value", "ci_low", "ci_high"} <= set(m[s]) and m[s]["ci_low"] < m[s]["value"] < m[s]["ci_high"]
        assert m["human_ceiling"]["rater_vs_rater"]["kendall"]["value"] > 0
    assert out["human_ceiling"]["leave_one_out"]["pearson"]["value"] > 0
    assert out["ranking"] == sorted(out["metrics"], key=lambda k: -out["metrics"][k]["kendall"]["value"])


@pytest.mark.slow
def test_example_human_with_the_semantic_metric(tmp_path):
    r = invoke("meta-eval", "example-human", "--metrics", "token_f1,rougeL_fmeasure,semantic_similarity", "--json",
               "--db", tmp_path / "m.db")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert set(out["metrics"]) == {"token_f1", "rougeL_fmeasure", "semantic_similarity"}
    assert out["metrics"]["semantic_similarity"]["kendall"]["ci_low"] is not None
    assert out["human_ceiling"]["rater_vs_rater"]["n_pairs"] == 6


def test_stored_meta_evals_show_again_and_compare(tmp_path):
    rows = [{"id": f"s{k}", "answer": "a b c"[: 1 + k % 5], "reference": "a b c", "human": k % 5 + (k % 3) / 3}
            for k in range(25)]
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    db = tmp_path / "m.db"
    first = json.loads(invoke("meta-eval", f, "--metrics", "token_f1", "--json", "--db", db, "--name", "v1").output)
    second = json.loads(invoke("meta-eval", f, "--metrics", "token_f1,rougeL_fmeasure", "--json", "--db", db,
                               "--compare", "v1").output)
    cmp = second["comparison"]
    assert cmp["paired"] is True and cmp["a"] == first["run_id"]
    row = cmp["metrics"]["token_f1"]["kendall"]
    assert row["difference"] == pytest.approx(0.0) and row["a"] == row["b"]
    assert cmp["metrics"]["rougeL_fmeasure"]["kendall"]["a"] is None
    shown = json.loads(invoke("meta-eval", "v1", "--json", "--db", db).output)
    assert shown["metrics"]["token_f1"]["kendall"] == first["metrics"]["token_f1"]["kendall"]
    listed = invoke("runs", "--tag", "meta-eval", "--json", "--db", db)
    assert first["run_id"] in listed.output
    r = invoke("meta-eval", "no-such-thing", "--json", "--db", db)
    assert r.exit_code == 2 and "no-such-thing" in r.output
    r = invoke("meta-eval", first["run_id"], "--metrics", "token_f1", "--db", db)
    assert r.exit_code == 2
    text = invoke("meta-eval", f, "--metrics", "token_f1", "--compare", first["run_id"], "--db", db)
    assert text.exit_code == 0 and "difference" in text.output


def test_judge_metrics_go_through_the_judge_client_with_dry_run(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    rows = []
    for k in range(12):
        good = k % 2 == 0
        rows.append({"id": f"s{k}", "question": f"Where is office {k}?",
                     "contexts": [f"Office {k} is in Lisbon near the river."],
                     "answer": f"Office {k} is in Lisbon." if good else f"Office {k} is on the Moon.",
                     "reference": f"Office {k} is in Lisbon.",
                     "human": {"ana": 5 if good else 1, "bruno": 4 if good else (1 if k != 3 else 2)}})
    f = write_jsonl(tmp_path / "j.jsonl", rows)
    db = tmp_path / "m.db"
    opts = judge_options(server)
    judge_args = ["--judge", opts["judge"], "--judge-base-url", opts["judge_base_url"], "--judge-api-key-env",
                  opts["judge_api_key_env"]]
    r = invoke("meta-eval", f, "--metrics", "faithfulness", "--dry-run", "--json", "--db", db, *judge_args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["planned_calls"] > 0 and server.n_requests == 0
    r = invoke("meta-eval", f, "--metrics", "faithfulness,token_f1", "--json", "--db", db, "--option",
               "judge_backoff_base=0.01", *judge_args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    m = out["metrics"]["faithfulness"]
    assert m["n"] == 12 and m["kendall"]["value"] > 0.5 and out["judge"]["calls"] > 0
    assert out["human_ceiling"]["rater_vs_rater"]["pearson"]["value"] > 0.9
    before = server.n_requests
    again = json.loads(invoke("meta-eval", f, "--metrics", "faithfulness", "--json", "--db", db, *judge_args).output)
    assert server.n_requests == before and again["metrics"]["faithfulness"]["kendall"] == m["kendall"]  # cached
    r = invoke("meta-eval", f, "--metrics", "faithfulness", "--db", db)
    assert r.exit_code == 2 and "judge" in r.output.lower()


def test_report_has_the_section_and_one_plot_per_metric(tmp_path):
    rows = [{"id": f"s<{k}>", "answer": "<script>x</script> a b"[: 20 + k % 4], "reference": "a b c",
             "human": {"r1": k % 4, "r2": (k + 1) % 4}} for k in range(20)]
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    db = tmp_path / "m.db"
    out = json.loads(invoke("meta-eval", f, "--metrics", "token_f1,chrf,exact_match", "--json", "--db", db).output)
    r = invoke("report", out["run_id"], "-o", tmp_path / "r.html", "--db", db)
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert "Agreement with human judgement" in html and "rater vs rater" in html
    from ragmeter.apps.report.render import build_report  # noqa: F401  (the figures are keyed by element id)

    for i in range(3):
        assert f'id="r0-meta-{i}"' in html and f'"r0-meta-{i}"' in html
    assert "<script>x</script>" not in html
    shown = invoke("show", out["run_id"], "--db", db)
    assert shown.exit_code == 0 and "meta-evaluation" in shown.output and "human, rater vs rater" in shown.output
    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app
    from ragmeter.store import open_store

    page = TestClient(create_app(open_store(str(db))), base_url="http://127.0.0.1").get(f"/runs/{out['run_id']}")
    assert page.status_code == 200 and "Agreement with human judgement" in page.text and "r0-meta-2" in page.text


def test_library_call_and_offline_expansion(tmp_path):
    from ragmeter.analysis.meta_eval.evaluation import meta_evaluate, offline_metrics

    rows = [{"id": f"s{k}", "question": "q", "answer": "a b"[: 1 + k % 3], "reference": "a b", "human": k % 3}
            for k in range(9)]
    names = offline_metrics(read_labels(rows).samples)
    assert "token_f1" in names and "semantic_similarity" in names
    assert not any(n.startswith("bert_large") or n == "faithfulness" for n in names)
    res = meta_evaluate(rows, ["token_f1", "exact_match"], db=f"sqlite:///{tmp_path / 'l.db'}", n_bootstrap=50)
    assert res["ranking"][0] in ("token_f1", "exact_match") and res["n_bootstrap"] == 50
    with pytest.raises(DatasetError):
        read_labels([{"id": "a", "answer": "x"}])


def test_gzipped_files_read_everywhere(tmp_path):
    rows = [{"id": f"s{k}", "answer": "a", "reference": "a b", "human": k} for k in range(4)]
    gz = tmp_path / "p.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert len(ragmeter.load(gz)) == 4
    assert read_labels(gz).human.tolist() == [0.0, 1.0, 2.0, 3.0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
                          st.just('{"id": "a", "answer": "x", "human": 1}'),
                          st.just('{"instance_id": 1, "model1": "x", "model2": "y", "overall_label": "A"}'),
                          st.just("id,answer,human"), st.just("{]"), st.just('"')), min_size=1, max_size=5),
       st.sampled_from(["jsonl", "csv", "json"]), st.booleans())
def test_fuzzed_files_exit_cleanly_naming_the_file(tmp_path, lines, suffix, pairwise):
    f = tmp_path / f"fz.{suffix}"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--pairwise"] if pairwise else []
    r = runner.invoke(app, ["meta-eval", str(f), "--metrics", "token_f1", "--bootstrap", "10", "--json",
                            "--db", str(tmp_path / "f.db"), *args])
    assert r.exit_code in (0, 2, 3), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code == 2:
        assert "fz." in r.output or "--" in r.output, r.output


def test_offline_lists_only_metrics_that_run_from_their_name_and_give_values(tmp_path):
    """`--metrics offline` (README, docs/meta-eval.md) exits 0: no metric that needs more than its
    name (the openai_* grader metrics need a grader object), none with no value on the data."""
    from ragmeter.analysis.meta_eval.evaluation import meta_evaluate, offline_metrics

    prose = [{"id": f"s{k}", "question": "q", "answer": "a b c"[: 1 + k % 5], "reference": "a b c", "human": k % 3}
             for k in range(12)]
    names = offline_metrics(read_labels(prose).samples)
    assert not [n for n in names if n.startswith("openai_")]
    assert "evals_json_match" not in names and "evals_match" in names
    as_json = [{**r, "answer": json.dumps({"a": k % 2}), "reference": json.dumps({"a": 1})} for k, r in enumerate(prose)]
    assert "evals_json_match" in offline_metrics(read_labels(as_json).samples)
    res = meta_evaluate(prose, ["offline"], db=f"sqlite:///{tmp_path / 'o.db'}", n_bootstrap=20)
    assert res["status"] == "completed" and res["incomplete"] == [], res["incomplete"]
