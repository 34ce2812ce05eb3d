"""Sample-level retrieval metrics: formulas on hand-worked examples, relevance rules (id, text,
span, similarity), duplicates, edge cases, the registered metrics through the runner."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragmeter
from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.metrics import get_spec, resolve
from ragmeter.metrics import retrieval as R
from ragmeter.metrics.retrieval import matching
from references import require_reference


# ----------------------------------------------------------------------------- seed examples
def test_seed_004_precision_recall_mrr_examples():
    retrieved = ["doc1", "doc5", "doc2", "doc8", "doc3"]
    relevant = {"doc1", "doc2", "doc3", "doc4"}
    assert R.precision_at_k(retrieved, relevant, 5) == pytest.approx(0.6)
    assert R.recall_at_k(retrieved, relevant, 5) == pytest.approx(0.75)
    queries = [(["doc2", "doc1", "doc3"], {"doc1", "doc3"}), (["doc5", "doc2", "doc1"], {"doc1"}),
               (["doc1", "doc4", "doc5"], {"doc1", "doc4"})]
    assert R.mean_reciprocal_rank(queries) == pytest.approx((1 / 2 + 1 / 3 + 1) / 3)


def test_seed_004_ndcg_with_graded_relevance():
    # seed 004: retrieved relevances [3, 0, 2, 1, 2]; ideal [3, 2, 2, 1, 0]
    def seed_dcg(rels, k):
        rels = np.asarray(rels[:k], dtype=float)
        return float(np.sum((2 ** rels - 1) / np.log2(np.arange(2, len(rels) + 2))))

    expected = seed_dcg([3, 0, 2, 1, 2], 5) / seed_dcg([3, 2, 2, 1, 0], 5)
    got = R.ndcg_at_k(["a", "b", "c", "d", "e"], {"a": 3, "c": 2, "d": 1, "e": 2}, 5)
    assert got == pytest.approx(expected, abs=1e-12)
    assert R.dcg_at_k([3, 0, 2, 1, 2], 5) == pytest.approx(seed_dcg([3, 0, 2, 1, 2], 5))
    linear = (3 + 2 / math.log2(4) + 1 / math.log2(5) + 2 / math.log2(6)) / (
        3 + 2 / math.log2(3) + 2 / math.log2(4) + 1 / math.log2(5))
    assert R.ndcg_at_k(["a", "b", "c", "d", "e"], {"a": 3, "c": 2, "d": 1, "e": 2}, 5, gain="linear") == \
        pytest.approx(linear, abs=1e-12)
    with pytest.raises(MetricError, match="gain"):
        R.ndcg_at_k(["a"], {"a": 1}, 5, gain="cubic")


def test_hybrid_log_rank_hand_worked():
    # n = 3: ranks 1 and 3 score 1 and 0 -> quality (1 + 0) / 2, recall 1
    assert R.hybrid_log_rank_score(["a", "x", "b"], {"a", "b"}) == pytest.approx(0.75)
    # gamma 2, alpha 0.3, n = 5: lrs(2) = 1 - ln 3 / ln 9 = 0.5, lrs(5) = 0; recall 2/3
    got = R.hybrid_log_rank_score(["x", "a", "y", "z", "b"], {"a", "b", "c"}, gamma=2.0, alpha=0.3)
    assert got == pytest.approx(0.3 * 2 / 3 + 0.7 * (0.5 / 3), abs=1e-12)
    # gamma 0.5, n = 4, rank 2: 1 - ln(1.5) / ln(2.5)
    lrs = 1 - math.log(1.5) / math.log(2.5)
    assert R.log_rank_score(2, 4, gamma=0.5) == pytest.approx(lrs, abs=1e-12)
    assert R.hybrid_log_rank_score(["x", "a", "y", "z"], {"a"}, gamma=0.5, alpha=0.0) == pytest.approx(lrs)
    assert R.hybrid_log_rank_score(["a"], {"a"}) == 1.0  # n == 1
    assert R.hybrid_log_rank_score(["a", "a", "b"], {"a", "b"}) == pytest.approx(0.75)  # duplicate once
    assert R.hybrid_log_rank_score([], {"a"}) == 0.0
    assert math.isnan(R.hybrid_log_rank_score(["a"], set()))
    for gamma in (0.0, -1.0):
        with pytest.raises(MetricError, match="gamma must be > 0"):
            R.hybrid_log_rank_score(["a"], {"a"}, gamma=gamma)
    with pytest.raises(MetricError, match="alpha"):
        R.hybrid_log_rank_score(["a"], {"a"}, alpha=1.5)


def test_hybrid_similarity_uses_the_best_rank_of_each_ground_truth_item():
    e = np.eye(4)
    retrieved = [e[3], e[1] * 0.9 + e[3] * 0.1, e[0], e[1]]
    got = R.hybrid_log_rank_score_similarity(retrieved, [e[0], e[1]], similarity_threshold=0.8)
    # gt0 first matched at rank 3, gt1 at rank 2 (cos 0.994); n = 4
    lrs = [1 - math.log(1 + 2) / math.log(4), 1 - math.log(1 + 1) / math.log(4)]
    assert got == pytest.approx(0.5 * 1.0 + 0.5 * sum(lrs) / 2, abs=1e-12)


# ----------------------------------------------------------------------------- edge cases
def test_edge_cases():
    assert R.precision_at_k(["a", "b", "c"], {"a"}, 10) == pytest.approx(0.1)  # k not reduced
    assert R.precision_at_k([], {"a"}, 3) == 0.0
    assert R.recall_at_k([], {"a"}, 3) == 0.0
    assert R.precision_at_k(["a"], set(), 3) == 0.0  # nothing relevant: all retrieved are non-relevant
    for fn in (R.recall_at_k, R.f1_at_k, R.hit_rate_at_k):
        assert math.isnan(fn(["a"], set(), 3))
    assert math.isnan(R.reciprocal_rank(["a"], set()))
    assert math.isnan(R.average_precision(["a"], set()))
    assert math.isnan(R.r_precision(["a"], set()))
    assert math.isnan(R.ndcg_at_k(["a"], {"a": 0}, 3))  # a grade-0 chunk is not relevant
    assert R.f1_at_k(["x"], {"a"}, 1) == 0.0
    assert R.reciprocal_rank(["x", "y", "a"], {"a"}, k=2) == 0.0
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(MetricError, match="k must be a positive integer"):
            R.precision_at_k(["a"], {"a"}, bad_k)
    with pytest.raises(MetricError, match="not a single string"):
        R.precision_at_k("abc", {"a"}, 1)
    assert R.precision_at_k(["ü", "北京", "a"], {"北京"}, 2) == 0.5


def _filler(retrieved: list[str]) -> list[str]:
    """Later duplicates replaced by unique non-relevant ids: what "count once" means."""
    seen, out = set(), []
    for i, d in enumerate(retrieved):
        out.append(d if d not in seen else f"__dup{i}")
        seen.add(d)
    return out


@pytest.mark.contract
def test_duplicates_count_once_and_match_pytrec_eval():
    pytrec_eval = require_reference("pytrec_eval")
    rng = random.Random(7)
    measures = {"P.1,3,5,20", "recall.1,3,5,20", "recip_rank", "map", "Rprec", "ndcg_cut.3,20", "success.1,3"}
    for case in range(300):
        pool = [f"d{i}" for i in range(rng.randint(1, 12))]
        retrieved = [rng.choice(pool) for _ in range(rng.randint(0, 15))]
        relevant = {d: rng.choice([1, 2, 3]) for d in rng.sample(pool, rng.randint(1, len(pool)))}
        filled = _filler(retrieved)
        run = {"q": {d: float(len(filled) - i) for i, d in enumerate(filled)}}
        ref = pytrec_eval.RelevanceEvaluator({"q": relevant}, measures).evaluate(run)
        ref = ref.get("q") or {name: 0.0 for name in ("P_1", "P_3", "P_5", "P_20", "recall_1", "recall_3",
                                                      "recall_5", "recall_20", "recip_rank", "map", "Rprec",
                                                      "ndcg_cut_3", "ndcg_cut_20", "success_1", "success_3")}
        for k in (1, 3, 5, 20):
            assert R.precision_at_k(retrieved, relevant, k) == pytest.approx(ref[f"P_{k}"], abs=1e-12), case
            assert R.recall_at_k(retrieved, relevant, k) == pytest.approx(ref[f"recall_{k}"], abs=1e-12)
        for k in (3, 20):
            assert R.ndcg_at_k(retrieved, relevant, k, gain="linear") == pytest.approx(ref[f"ndcg_cut_{k}"],
                                                                                       abs=1e-12)
        for k in (1, 3):
            assert R.hit_rate_at_k(retrieved, relevant, k) == ref[f"success_{k}"]
        assert R.reciprocal_rank(retrieved, relevant) == pytest.approx(ref["recip_rank"], abs=1e-12)
        assert R.average_precision(retrieved, relevant) == pytest.approx(ref["map"], abs=1e-12)
        assert R.r_precision(retrieved, relevant) == pytest.approx(ref["Rprec"], abs=1e-12)


# ----------------------------------------------------------------------------- relevance rules
def _s(sid: str, ctx: list[Chunk], rel: list[Chunk]) -> Sample:
    return Sample(id=sid, question="q", contexts=ctx, relevant=rel)


def test_match_rules_and_auto_choice():
    a = Chunk(id="a", text="alpha", source="f", start=0, end=10)
    b = Chunk(id="b", text="beta", source="f", start=10, end=20)
    samples = [
        _s("ids", [a, b], [b]),
        _s("spans", [Chunk(source="f", start=8, end=20), Chunk(source="f", start=0, end=4)],
           [Chunk(source="f", start=10, end=20, grade=2)]),
        _s("texts", [Chunk(text="beta"), Chunk(text="alpha")], [Chunk(text="alpha")]),
        _s("nothing", [Chunk(text="x")], [Chunk(id="y")]),
    ]
    bm = matching.match_samples(samples)
    assert bm.rules == ["exact_id", "span", "exact_text", None]
    assert bm.reasons[:3] == [None, None, None] and "cannot match chunks" in bm.reasons[3]
    from ragmeter.metrics.retrieval import measures as M

    np.testing.assert_allclose(M.reciprocal_rank(bm.matrix), [0.5, 1.0, 0.5, 0.0])
    bm = matching.match_samples([_s("x", [a, Chunk(text="t")], [a])], "exact_id")
    assert bm.reasons == ["cannot match by id: a chunk has no id"]
    with pytest.raises(MetricError, match="match must be one of"):
        matching.match_samples(samples, "fuzzy")
    with pytest.raises(MetricError, match="span_threshold"):
        matching.match_samples(samples, "span", span_threshold=0)


def test_span_rule_threshold_and_sources():
    gt = [("doc", 100, 200)]
    # the retrieved spans cover 50%, 60% and (other source) 0% of the relevant span
    m = matching.overlap_matrix([("doc", 150, 400), ("doc", 0, 160), ("other", 100, 200)], gt, 0.5)
    assert m[:, 0].tolist() == [True, True, False]
    m = matching.overlap_matrix([("doc", 150, 400), ("doc", 0, 160), ("other", 100, 200)], gt, 0.55)
    assert m[:, 0].tolist() == [False, True, False]
    m = matching.overlap_matrix([("doc", 0, 160)], gt, 0.6)
    assert m[0, 0]
    m = matching.overlap_matrix([("doc", 0, 159)], gt, 0.6)
    assert not m[0, 0]
    assert matching.overlap_matrix([("doc", 0, 10)], [("doc", 5, 5)], 0.5)[0, 0]  # zero-length gt: contained


def test_one_retrieved_span_covering_two_relevant_spans():
    s = _s("q", [Chunk(source="d", start=0, end=100), Chunk(source="d", start=200, end=300)],
           [Chunk(source="d", start=10, end=20), Chunk(source="d", start=50, end=60)])
    bm = matching.match_samples([s], "span")
    from ragmeter.metrics.retrieval import measures as M

    m = bm.matrix
    assert M.precision(m, 1)[0] == 1.0 and M.precision(m, 2)[0] == 0.5
    assert M.recall(m, 1)[0] == 1.0 and M.average_precision(m)[0] == 1.0
    assert M.ndcg(m, 2)[0] == 1.0 and M.r_precision(m)[0] == 0.5


def test_similarity_functions_count_near_duplicates_once():
    e = np.eye(3)
    near = e[0] * 0.95 + e[1] * 0.05
    retrieved = [e[0], near, e[2]]
    assert R.precision_at_k_similarity(retrieved, [e[0]], k=2) == 0.5
    assert R.recall_at_k_similarity(retrieved, [e[0]], k=1) == 1.0
    assert R.f1_at_k_similarity(retrieved, [e[0]], k=2) == pytest.approx(2 * 0.5 / 1.5)
    assert R.precision_at_k_similarity(retrieved, [e[0]], k=2, similarity_threshold=1.01 - 1e-9) == 0.0
    assert R.precision_at_k_similarity([], [e[0]], k=2) == 0.0
    assert R.recall_at_k_similarity(np.array([[3.0, 0, 0]]), [np.array([0.5, 0, 0])], k=1) == 1.0  # unnormalised


def test_span_character_metrics():
    assert R.span_precision([("d", 0, 100)], [("d", 50, 150)]) == 0.5
    assert R.span_recall([("d", 0, 100)], [("d", 50, 150)]) == 0.5
    assert R.span_iou([("d", 0, 100)], [("d", 50, 150)]) == pytest.approx(1 / 3)
    # overlapping retrieved spans count characters once; other sources never overlap
    assert R.span_precision([("d", 0, 100), ("d", 50, 100), ("e", 0, 100)], [("d", 0, 50)]) == 0.25
    assert R.span_recall([("d", 0, 100), ("d", 50, 100)], [("d", 0, 50), ("d", 25, 75)]) == 1.0
    assert R.span_precision([], [("d", 0, 1)]) == 0.0
    assert math.isnan(R.span_iou([("d", 0, 1)], []))
    assert R.span_iou([Chunk(source="d", start=0, end=10)], [Chunk(source="d", start=0, end=10)]) == 1.0
    with pytest.raises(MetricError):
        R.span_iou([Chunk(text="no span")], [("d", 0, 1)])


# ----------------------------------------------------------------------------- registered metrics
def test_names_params_and_aliases():
    assert resolve("precision@5").params["k"] == 5 and resolve("precision@5").key == "precision@5"
    assert resolve("precision_at_k").spec.name == "precision"
    assert resolve("ndcg@10").params["gain"] == "exponential"
    r = resolve({"name": "ndcg@3", "params": {"gain": "linear", "match": "span"}})
    assert r.key == "ndcg@3(gain=linear,match=span)"
    assert resolve("mrr").params["k"] is None and resolve("mrr@10").params["k"] == 10
    assert resolve("map@100").params["k"] == 100
    assert resolve("hybrid_log_rank").params == {**resolve("hybrid_log_rank").params, "gamma": 1.0, "alpha": 0.5}
    with pytest.raises(ConfigError):
        resolve({"name": "precision", "params": {"bogus": 1}})
    spec = get_spec("hybrid_log_rank")
    assert spec.family == "retrieval" and spec.requires == ("contexts", "relevant")
    assert spec.check(None, **{**spec.defaults, "gamma": 0}) == "gamma must be > 0, got 0"
    assert get_spec("precision").check(None, **{**get_spec("precision").defaults, "k": 0}) is not None


def _rows():
    return [
        {"id": "1", "question": "q", "contexts": [{"id": "a"}, {"id": "x"}, {"id": "b"}],
         "relevant": [{"id": "a"}, {"id": "b", "grade": 3}]},
        {"id": "2", "question": "q", "contexts": [], "relevant": [{"id": "a"}]},
        {"id": "3", "question": "q", "contexts": [{"id": "a"}], "relevant": []},
        {"id": "4", "question": "q", "contexts": [{"text": "no id"}], "relevant": [{"id": "a"}]},
        {"id": "5", "question": "q"},
    ]


def test_registered_metrics_through_the_runner(tmp_path):
    res = ragmeter.evaluate(_rows(), ["precision@2", "recall@2", "mrr", "map", "ndcg@3", "hybrid_log_rank",
                                      "r_precision", "f1@3", "hit_rate@1",
                                      {"name": "precision@2", "params": {"match": "exact_id"}}],
                            db=f"sqlite:///{tmp_path / 'r.db'}")
    rows = {r["id"]: r for r in res.rows()}
    assert rows["1"]["precision@2"] == 0.5 and rows["1"]["recall@2"] == 0.5
    assert rows["1"]["map"] == pytest.approx((1 + 2 / 3) / 2)
    exp = (1 + 7 / 2) / (7 + 1 / math.log2(3))  # gains 2^1-1 at rank 1, 2^3-1 at rank 3
    assert rows["1"]["ndcg@3"] == pytest.approx(exp, abs=1e-12)
    assert rows["1"]["hybrid_log_rank"] == pytest.approx(0.75)
    assert rows["2"]["precision@2"] == 0.0 and rows["2"]["mrr"] == 0.0  # empty retrieval scores 0
    assert rows["3"]["precision@2"] == 0.0  # nothing relevant: precision stays defined
    for m in ("recall@2", "mrr", "map", "ndcg@3", "hybrid_log_rank", "r_precision", "f1@3", "hit_rate@1"):
        assert rows["3"][m] is None and rows["3"]["no_value_reasons"][m] == "no relevant chunks"
    assert "cannot match chunks" in rows["4"]["no_value_reasons"]["precision@2"]
    assert rows["5"]["no_value_reasons"]["mrr"].startswith("missing field")
    assert rows["4"]["no_value_reasons"]["precision@2(match=exact_id)"] == "cannot match by id: a chunk has no id"


class _FakeEmbeddings:
    """Stands in for the embeddings service: fixed vectors per text, counts calls."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.requested: list[str] = []
        self.calls = 0

    def request(self, texts, model=None):
        self.requested.extend(texts)

    def matrix(self, texts, model=None):
        self.calls += 1
        rows = np.stack([self.vectors[t] for t in texts]).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_similarity_rule_uses_the_embeddings_service_once_per_batch():
    e = np.eye(3)
    svc = _FakeEmbeddings({"paris": e[0], "capital is paris": e[0] * 0.9 + e[1] * 0.1,
                           "berlin": e[1], "rome": e[2]})
    ctx = ScoringContext()
    ctx._services["embeddings"] = svc
    samples = [Sample(id="1", contexts=[Chunk(text="berlin"), Chunk(text="capital is paris")],
                      relevant=[Chunk(text="paris")]),
               Sample(id="2", contexts=[Chunk(text="rome")], relevant=[Chunk(text="paris")])]
    params = {**get_spec("precision").defaults, "match": "similarity", "k": 2}
    get_spec("precision").prepare(samples, ctx, **params)
    assert set(svc.requested) == {"paris", "capital is paris", "berlin", "rome"}
    p = get_spec("precision").fn(samples, ctx, **params)
    rr = get_spec("mrr").fn(samples, ctx, **{**get_spec("mrr").defaults, "match": "similarity"})
    assert [s.value for s in p] == [0.5, 0.0] and [s.value for s in rr] == [0.5, 0.0]
    assert svc.calls == 1  # the second metric reused the cached relevance matrix


def test_the_relevance_matrix_is_built_once_for_several_metrics(monkeypatch):
    calls = []
    real = matching.match_samples

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(matching, "match_samples", counting)
    samples = ragmeter.load(_rows()[:3]).samples
    ctx = ScoringContext()
    for name in ("precision", "recall", "ndcg", "map", "mrr"):
        spec = get_spec(name)
        spec.fn(samples, ctx, **spec.defaults)
    assert len(calls) == 1
    spec = get_spec("precision")
    spec.fn(samples, ctx, **{**spec.defaults, "match": "exact_text"})
    assert len(calls) == 2


def test_bundled_example_span_and_id_relevance_agree():
    samples = ragmeter.load("example").samples
    both = [s for s in samples if s.contexts and s.relevant
            and all(c.id is not None and c.has_span for c in s.contexts + s.relevant)]
    assert len(both) >= 100
    ctx = ScoringContext()
    for name in ("precision", "recall"):
        spec = get_spec(name)
        for k in (1, 3, 5, 10):
            by_id = spec.fn(both, ctx, **{**spec.defaults, "k": k, "match": "exact_id"})
            by_span = spec.fn(both, ctx, **{**spec.defaults, "k": k, "match": "span"})
            assert [s.value for s in by_id] == [s.value for s in by_span], (name, k)
            assert all(s.value is not None for s in by_id)


def test_span_metrics_through_the_runner(tmp_path):
    rows = [{"id": "1", "contexts": [{"source": "d", "start": 0, "end": 100}, {"source": "d", "start": 50, "end": 150}],
             "relevant": [{"source": "d", "start": 100, "end": 200}]},
            {"id": "2", "contexts": [{"text": "t"}], "relevant": [{"source": "d", "start": 0, "end": 1}]}]
    res = ragmeter.evaluate(rows, ["span_precision", "span_recall", "span_iou", "span_precision@1"],
                            db=f"sqlite:///{tmp_path / 'r.db'}")
    r = {x["id"]: x for x in res.rows()}
    assert r["1"]["span_precision"] == pytest.approx(50 / 150) and r["1"]["span_recall"] == 0.5
    assert r["1"]["span_iou"] == pytest.approx(50 / 200) and r["1"]["span_precision@1"] == 0.0
    assert r["2"]["no_value_reasons"]["span_iou"] == "span metrics need source/start/end on every chunk"
    assert res.scores["span_iou"][0].details == {"retrieved_chars": 150, "relevant_chars": 100,
                                                 "overlap_chars": 50}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(1, 40)), max_size=8),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(1, 40), st.integers(1, 3)),
                min_size=1, max_size=5),
       st.sampled_from([0.1, 0.5, 1.0]))
def test_span_matching_keeps_every_measure_in_range(ret, rel, threshold):
    from ragmeter.metrics.retrieval import measures as M

    s = _s("q", [Chunk(source=str(a), start=b, end=b + c) for a, b, c in ret],
           [Chunk(source=str(a), start=b, end=b + c, grade=g) for a, b, c, g in rel])
    m = matching.match_samples([s], "span", span_threshold=threshold).matrix
    for v in (M.precision(m, 3), M.recall(m, 3), M.average_precision(m), M.reciprocal_rank(m),
              M.r_precision(m), M.ndcg(m, 5), M.ndcg(m, 5, "exponential"), M.hybrid_log_rank(m),
              M.f1(m, 2), M.hit_rate(m, 2)):
        assert 0.0 <= v[0] <= 1.0
