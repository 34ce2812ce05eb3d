"""Semantic metrics: values against sentence-transformers + cosine, the run path, the CLI cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragmeter
from ragmeter.core.errors import MetricError
from ragmeter.embed import BERT_MODELS, bundled_model_path, get_encoder
from ragmeter.metrics.registry import get_spec
from ragmeter.metrics.semantic import (
    best_match_cosine,
    best_threshold,
    context_similarity,
    roc_auc,
    semantic_similarity,
    separation_report,
)
from references import require_reference

# ---- kernels against brute force -----------------------------------------------------------------


def _unit(rng, n, d=6):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 5), min_size=1, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_best_match_cosine_equals_a_loop(sizes, seed):
    rng = np.random.default_rng(seed)
    q = _unit(rng, len(sizes))
    c = _unit(rng, sum(sizes))
    if c.shape[0] > 1:
        c[-1] = c[0]  # duplicate candidates: ties pick the first
    best, arg = best_match_cosine(q, c, sizes)
    start = 0
    for i, n in enumerate(sizes):
        if n == 0:
            assert np.isnan(best[i]) and arg[i] == -1
        else:
            sims = [float(np.dot(q[i].astype(np.float64), c[start + j])) for j in range(n)]
            assert best[i] == pytest.approx(max(sims), abs=1e-6)
            assert arg[i] == next(j for j, v in enumerate(sims) if abs(v - max(sims)) < 1e-6)
        start += n


def test_blank_pairs_count_as_identical_only_when_asked():
    q = np.array([[0.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    c = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    best, _ = best_match_cosine(q, c, [1, 2])
    np.testing.assert_allclose(best, [0.0, 1.0])
    best, _ = best_match_cosine(q, c, [1, 2], np.array([True, False]), np.array([True, True, False]))
    np.testing.assert_allclose(best, [1.0, 1.0])


@pytest.mark.contract
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.3, 0.5, 0.5, 0.7, 0.9]), st.booleans()), min_size=2, max_size=40))
def test_roc_auc_and_best_threshold_against_references(pairs):
    roc_auc_score = require_reference("sklearn.metrics").roc_auc_score

    s = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    t, acc = best_threshold(s, y)
    brute = max(((s >= c) == y).mean() for c in [*np.unique(s), np.inf])
    assert acc == pytest.approx(brute)
    assert ((s >= t) == y).mean() == pytest.approx(acc)
    if y.all() or not y.any():
        with pytest.raises(MetricError, match="both"):
            roc_auc(s, y)
    else:
        assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s))


def test_separation_report_fields_and_errors():
    s = np.array([0.9, 0.8, 0.85, 0.4, 0.3, 0.7, 0.6, 0.95, 0.2, 0.5])
    y = np.array([1, 1, 1, 0, 0, 1, 0, 1, 0, 1], dtype=float)
    r = separation_report(s, y, fixed=(0.7, 0.75), folds=5)
    assert r["n"] == 10 and r["n_correct"] == 6 and r["cv_folds"] == 5
    assert r["best_threshold"] == 0.5 and r["best_accuracy"] == 0.9  # 0.7 ties; the lowest wins
    assert r["majority_accuracy"] == 0.6
    assert r["accuracy_at"] == {"0.7": 0.9, "0.75": 0.8}
    assert 0 <= r["cv_accuracy"] <= 1 and r["roc_auc"] == pytest.approx(0.9583, abs=1e-4)
    with pytest.raises(MetricError):
        separation_report([0.5], [1])
    with pytest.raises(MetricError):
        separation_report([0.5, 0.4], [1])


# ---- public functions with the real model ---------------------------------------------------------


@pytest.fixture(scope="module")
def encoder():
    return get_encoder()


def _reference_cosine(model, a, b):
    """sentence-transformers' own embeddings and scikit-learn's cosine: the reference."""
    cosine_similarity = require_reference("sklearn.metrics.pairwise").cosine_similarity

    x = model.encode([a, b], convert_to_numpy=True)
    return float(cosine_similarity(x[:1], x[1:])[0, 0])


@pytest.mark.contract
def test_semantic_similarity_matches_the_reference(encoder):
    answers = ["The capital of France is Paris", "Il pleut à Paris ☂", "The ferry leaves at 9",
               "The capital of France is Paris", "Paris"]
    references = [["Paris is France's capital city", "Lyon"], "Es regnet in Paris",
                  ["Departure is at nine", "The ferry leaves at 9"], ["Paris"], "Paris"]
    got = semantic_similarity(answers, references, encoder=encoder)
    refs = [[r] if isinstance(r, str) else r for r in references]
    want = [max(_reference_cosine(get_encoder(backend="st").model, a, r) for r in rs) for a, rs in zip(answers, refs, strict=True)]
    np.testing.assert_allclose(got, np.clip(want, 0, 1), atol=1e-5)
    assert got[2] == pytest.approx(1.0, abs=1e-6) and got[4] == pytest.approx(1.0, abs=1e-6)
    assert got.dtype == np.float64 and got.shape == (5,)


def test_semantic_similarity_edge_cases(encoder):
    got = semantic_similarity(["", "   ", "Paris", ""], ["Paris", " ", "", ["", "x"]], encoder=encoder)
    np.testing.assert_array_equal(got, [0.0, 1.0, 0.0, 1.0])
    assert semantic_similarity([], [], encoder=encoder).shape == (0,)
    with pytest.raises(MetricError, match="one entry per answer"):
        semantic_similarity(["a", "b"], ["a"], encoder=encoder)
    with pytest.raises(MetricError, match=r"references\[0\] is empty"):
        semantic_similarity(["a"], [[]], encoder=encoder)
    with pytest.raises(MetricError, match="must be a string"):
        semantic_similarity([None], ["a"], encoder=encoder)


def test_negative_cosines_are_reported_as_zero(monkeypatch):
    class Opposite:
        model_id, dim = "opposite", 2

        def encode(self, texts, *, batch_size=None):
            return np.array([[1.0, 0.0] if t.startswith("+") else [-1.0, 0.0] for t in texts], np.float32)

    np.testing.assert_array_equal(semantic_similarity(["+a", "+a"], ["-b", ["-b", "+c"]], encoder=Opposite()),
                                  [0.0, 1.0])


@pytest.mark.contract
def test_context_similarity_matches_the_reference(encoder):
    answers = ["Check-in closes 20 minutes before departure", "Paris", "x"]
    contexts = [["Vehicles must check in 20 minutes before sailing.", "The café opens at 7."], [], ["", " "]]
    got = context_similarity(answers, contexts, encoder=encoder)
    want0 = max(_reference_cosine(get_encoder(backend="st").model, answers[0], c) for c in contexts[0])
    np.testing.assert_allclose(got, [want0, 0.0, 0.0], atol=1e-5)


# ---- through the runner ----------------------------------------------------------------------------


ROWS = [
    {"id": "1", "answer": "The capital of France is London", "reference": "The capital of France is Paris",
     "contexts": ["Paris is the capital of France.", "London is the capital of the United Kingdom."]},
    {"id": "2", "answer": "Paris is the capital of France.", "references": ["Paris", "Lyon"], "contexts": []},
    {"id": "3", "answer": "", "reference": "Paris", "contexts": ["Paris"]},
    {"id": "4", "answer": "Paris", "reference": "Paris"},
    {"id": "5", "question": "no answer given", "reference": "Paris"},
]


def test_registry_entries():
    for key in ["semantic_similarity", "context_similarity", *BERT_MODELS]:
        spec = get_spec(key)
        assert spec.family == "semantic" and spec.needs_embeddings and spec.range == (0.0, 1.0)
        assert spec.higher_is_better and spec.prepare is not None
    assert get_spec("semantic_similarity").param == "model"


def test_metrics_in_a_run_equal_the_public_functions(encoder, db_url):
    metrics = ["semantic_similarity", "context_similarity", "bert_all_MiniLM_L6_v2"]
    r = ragmeter.evaluate(ROWS, metrics, db=db_url)
    v = r.to_pandas().set_index("id")
    want = semantic_similarity([x["answer"] for x in ROWS[:4]],
                               [x.get("references") or x["reference"] for x in ROWS[:4]], encoder=encoder)
    np.testing.assert_allclose(v.loc[["1", "2", "3", "4"], "semantic_similarity"], want, atol=1e-5)
    np.testing.assert_allclose(v["bert_all_MiniLM_L6_v2"], v["semantic_similarity"], equal_nan=True)
    assert r.scores["semantic_similarity"][4].reason == "missing field: answer"
    want_ctx = context_similarity([x["answer"] for x in ROWS[:3]], [x["contexts"] for x in ROWS[:3]], encoder=encoder)
    np.testing.assert_allclose(v.loc[["1", "2", "3"], "context_similarity"], want_ctx, atol=1e-5)
    assert r.scores["semantic_similarity"][1].details == {"best_reference": 0}
    assert r.scores["context_similarity"][0].details == {"best_context": 0}
    assert r.scores["context_similarity"][1].details == {"n_contexts": 0}
    # one model, every distinct non-blank text embedded once, shared by the three metrics
    distinct = {t for x in ROWS for t in [x.get("answer", ""), x.get("reference", ""), *x.get("references", []),
                                          *x.get("contexts", [])] if t.strip()}
    assert r.extra["embeddings"]["computed"] == len(distinct)
    assert r.extra["embeddings"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_an_unavailable_bert_model_records_why_and_the_rest_runs(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path))  # an empty cache
    r = ragmeter.evaluate(ROWS[:2], ["semantic_similarity", "bert_large_nli_stsb_mean_tokens"], db=db_url)
    assert r.summary["semantic_similarity"]["n"] == 2
    assert r.summary["bert_large_nli_stsb_mean_tokens"]["n"] == 0
    reason = r.scores["bert_large_nli_stsb_mean_tokens"][0].reason
    assert reason.startswith("unavailable: embedding model 'sentence-transformers/bert-large-nli-stsb-mean-tokens' "
                             "is not available locally")
    assert "embedding_model_paths" in reason and "Hugging Face cache" in reason


def test_bert_keys_use_a_folder_given_in_embedding_model_paths(db_url):
    r = ragmeter.evaluate(ROWS[:2], ["semantic_similarity", "bert_base_nli_mean_tokens"], db=db_url,
                          options={"embedding_model_paths": {"bert_base_nli_mean_tokens": str(bundled_model_path())}})
    np.testing.assert_allclose([s.value for s in r.scores["bert_base_nli_mean_tokens"]],
                               [s.value for s in r.scores["semantic_similarity"]], atol=1e-6)
    assert r.extra["embeddings"]["by_model"]["sentence-transformers/bert-base-nli-mean-tokens"]["computed"] == 5


def test_eval_cli_rerun_embeds_nothing(tmp_path):
    from typer.testing import CliRunner

    from ragmeter.apps.cli import app

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in ROWS[:4]) + "\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    args = ["eval", str(data), "--metrics", "semantic_similarity,context_similarity", "--json", "--db", db]
    runner = CliRunner()
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    e1 = json.loads(first.stdout.strip().splitlines()[-1])["embeddings"]
    e2 = json.loads(second.stdout.strip().splitlines()[-1])["embeddings"]
    assert e1["computed"] > 0 and e1["cached"] == 0
    assert e2 == {**e2, "computed": 0, "cached": e1["computed"]}
    m1 = json.loads(first.stdout.strip().splitlines()[-1])["metrics"]["semantic_similarity"]["mean"]
    m2 = json.loads(second.stdout.strip().splitlines()[-1])["metrics"]["semantic_similarity"]["mean"]
    assert m1 == pytest.approx(m2, abs=1e-7)
