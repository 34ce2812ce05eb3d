"""Retrieval metrics: precision/recall/F1/hit rate@k, MRR, MAP, R-precision, nDCG, the hybrid
log-rank score, and character-level span precision/recall/IoU.

Two layers:

* plain functions over one ranked list, importable on their own like ``sklearn.metrics``
  (``precision_at_k(retrieved, relevant, k)``, the datapizza ``*_exact`` / ``*_similarity``
  variants, ``ndcg_at_k`` with graded relevance, ``span_iou`` ...);
* registered batch metrics (``precision@5``, ``ndcg@10``, ``mrr``, ``map``, ``hybrid_log_rank``,
  ``span_iou`` ...) that match every sample's ``contexts`` against its ``relevant`` chunks once
  per batch and matching rule, then reduce one relevance matrix with numpy.

Relevance (``match``): ``exact_id``, ``exact_text``, ``span`` (character overlap over
``span_threshold`` of the relevant span), ``similarity`` (cosine of embeddings at or above
``similarity_threshold``), or ``auto``: ids when every chunk has one, else spans, else texts.
Duplicates count once: a retrieved chunk that only matches relevant chunks already found higher
in the list is not relevant (it keeps its slot, so P@k still counts it in the denominator).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Chunk, Sample, Score
from ragmeter.metrics.registry import MetricSpec, register_metric
from ragmeter.metrics.retrieval import __all__ as _PUBLIC
from ragmeter.metrics.retrieval import matching
from ragmeter.metrics.retrieval import measures as M
from ragmeter.metrics.retrieval.matching import Span, span_of
from ragmeter.metrics.retrieval.relevance import RelevanceMatrix

#: the package lists these names once (it loads this module lazily on their first use)
__all__ = list(_PUBLIC)

NO_RELEVANT = "no relevant chunks"
Relevant = Iterable[Hashable] | Mapping[Hashable, float]


# ============================================================================ plain functions
def _grades(relevant: Relevant) -> dict[Hashable, float]:
    if isinstance(relevant, Mapping):
        out = {}
        for key, g in relevant.items():
            out[key] = float(g)
        return out
    if isinstance(relevant, str | bytes):
        raise MetricError("relevant must be a collection of ids or texts, not a single string")
    return {key: 1.0 for key in relevant}


def _one(retrieved: Sequence[Hashable], relevant: Relevant) -> RelevanceMatrix:
    if isinstance(retrieved, str | bytes):
        raise MetricError("retrieved must be a list of ids or texts, not a single string")
    retrieved = list(retrieved)
    items = matching.first_ranks_exact(retrieved, _grades(relevant))
    return RelevanceMatrix.from_first_ranks([len(retrieved)], [items])


def _one_similarity(retrieved_embeddings: Any, ground_truth_embeddings: Any, threshold: float,
                    grades: Sequence[float] | None = None) -> RelevanceMatrix:
    a = _as_rows(retrieved_embeddings)
    b = _as_rows(ground_truth_embeddings)
    g = [1.0] * len(b) if grades is None else [float(x) for x in grades]
    m = matching.cosine_matrix(a, b) >= threshold if len(a) and len(b) else np.zeros((len(a), len(b)), bool)
    return RelevanceMatrix.from_first_ranks([len(a)], [matching.first_ranks_matrix(m, g)], multi_match=True)


def _as_rows(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.reshape(0, 0) if x.size == 0 else (x[None, :] if x.ndim == 1 else x)
    rows = [np.asarray(r, dtype=np.float64).ravel() for r in x]
    if not rows:
        return np.zeros((0, 0))
    return np.vstack(rows)


def _f(v: np.ndarray) -> float:
    return float(v[0])


def precision_at_k(retrieved: Sequence[Hashable], relevant: Relevant, k: int) -> float:
    """Precision at k: the share of the first ``k`` retrieved items that are relevant.

    ``P@k = |{i <= k : retrieved[i] relevant}| / k``, in [0, 1]. ``k`` is not reduced when fewer
    than ``k`` items were retrieved (as in trec_eval). A repeated item counts once:
    later copies keep their slot but are not relevant. No relevant item gives 0.0; an empty
    ``retrieved`` gives 0.0.

    Args:
        retrieved: retrieved ids (or texts), best first.
        relevant: relevant ids (a set/list) or ``{id: grade}`` (grade > 0 is relevant).
        k: cutoff, a positive integer.

    Example:
        >>> precision_at_k(["doc1", "doc5", "doc2", "doc8", "doc3"], {"doc1", "doc2", "doc3", "doc4"}, 5)
        0.6
    """
    return _f(M.precision(_one(retrieved, relevant), k))


def recall_at_k(retrieved: Sequence[Hashable], relevant: Relevant, k: int) -> float:
    """Recall at k: the share of relevant items found among the first ``k`` retrieved.

    ``R@k = |relevant ∩ retrieved[:k]| / |relevant|``, in [0, 1]; ``NaN`` when there is no
    relevant item (undefined).

    Example:
        >>> recall_at_k(["doc1", "doc5", "doc2", "doc8", "doc3"], {"doc1", "doc2", "doc3", "doc4"}, 5)
        0.75
    """
    return _f(M.recall(_one(retrieved, relevant), k))


def f1_at_k(retrieved: Sequence[Hashable], relevant: Relevant, k: int) -> float:
    """F1 at k: harmonic mean of P@k and R@k, ``2PR / (P + R)`` (0 when both are 0); ``NaN``
    when there is no relevant item.

    Example:
        >>> round(f1_at_k(["a", "x", "b"], {"a", "b", "c", "d"}, 3), 4)
        0.5714
    """
    return _f(M.f1(_one(retrieved, relevant), k))


def hit_rate_at_k(retrieved: Sequence[Hashable], relevant: Relevant, k: int) -> float:
    """1.0 when a relevant item is among the first ``k`` retrieved, else 0.0 (trec_eval
    ``success_k``); ``NaN`` when there is no relevant item.

    Example:
        >>> hit_rate_at_k(["x", "a"], {"a"}, 1), hit_rate_at_k(["x", "a"], {"a"}, 2)
        (0.0, 1.0)
    """
    m = _one(retrieved, relevant)
    return float("nan") if m.n_rel[0] == 0 else _f(M.hit_rate(m, k))


def reciprocal_rank(retrieved: Sequence[Hashable], relevant: Relevant, k: int | None = None) -> float:
    """1 / rank of the first relevant item (0.0 when none is retrieved, within ``k`` if given);
    ``NaN`` when there is no relevant item.

    Example:
        >>> reciprocal_rank(["doc2", "doc1", "doc3"], {"doc1", "doc3"})
        0.5
    """
    m = _one(retrieved, relevant)
    return float("nan") if m.n_rel[0] == 0 else _f(M.reciprocal_rank(m, k))


def mean_reciprocal_rank(queries: Iterable[tuple[Sequence[Hashable], Relevant]]) -> float:
    """Mean of :func:`reciprocal_rank` over ``(retrieved, relevant)`` pairs, skipping pairs with no
    relevant item; ``NaN`` when none is left.

    Example:
        >>> round(mean_reciprocal_rank([(["d2", "d1"], {"d1"}), (["d1"], {"d1"})]), 4)
        0.75
    """
    vals = [reciprocal_rank(r, g) for r, g in queries]
    vals = [v for v in vals if v == v]
    return float(np.mean(vals)) if vals else float("nan")


def average_precision(retrieved: Sequence[Hashable], relevant: Relevant, k: int | None = None) -> float:
    """Average precision: ``(1/R) * sum over relevant retrieved items of P@(their rank)``.

    With ``k``, only items in the first ``k`` count (trec_eval ``map_cut_k``; still divided by R).
    In [0, 1]; ``NaN`` when there is no relevant item. MAP is its mean over queries.

    Example:
        >>> round(average_precision(["a", "x", "b"], {"a", "b", "c"}), 4)
        0.5556
    """
    return _f(M.average_precision(_one(retrieved, relevant), k))


def r_precision(retrieved: Sequence[Hashable], relevant: Relevant) -> float:
    """Precision at R, the number of relevant items: ``|relevant ∩ retrieved[:R]| / R``; ``NaN``
    when there is no relevant item.

    Example:
        >>> r_precision(["a", "x", "b"], {"a", "b"})
        0.5
    """
    return _f(M.r_precision(_one(retrieved, relevant)))


def dcg_at_k(relevances: Sequence[float], k: int, gain: str = "exponential") -> float:
    """Discounted cumulative gain of graded relevances in rank order (Järvelin and Kekäläinen, 2002).

    ``DCG@k = sum_{i<=k} gain(rel_i) / log2(i + 1)`` with ``gain = 2^rel - 1`` (``exponential``)
    or ``rel`` (``linear``, trec_eval).

    Example:
        >>> round(dcg_at_k([3, 0, 2, 1, 2], 5), 4)
        10.0912
    """
    k = M._k(k)
    rel = np.asarray(relevances, dtype=np.float64)[:k]
    ranks = np.arange(1, len(rel) + 1)
    return float(np.sum(M.gains(rel, gain) / np.log2(ranks + 1.0)))


def ndcg_at_k(retrieved: Sequence[Hashable], relevant: Relevant, k: int, gain: str = "exponential") -> float:
    """Normalised DCG at k with graded relevance.

    ``nDCG@k = DCG@k / IDCG@k`` where IDCG@k is the DCG of the relevant items sorted by grade;
    gains ``2^grade - 1`` (``exponential``, Burges et al.'s gain, default) or ``grade`` (``linear``, as
    trec_eval's ``ndcg_cut``); identical for binary relevance. In [0, 1]; ``NaN`` when no item
    has a positive grade.

    Args:
        retrieved: retrieved ids, best first.
        relevant: ``{id: grade}`` (or a set: grade 1).
        k: cutoff.
        gain: ``exponential`` or ``linear``.

    Example:
        >>> round(ndcg_at_k(["a", "b", "c"], {"a": 1, "c": 3}, 3), 4)
        0.5897
    """
    return _f(M.ndcg(_one(retrieved, relevant), k, gain))


def log_rank_score(rank: int, n: int, gamma: float = 1.0) -> float:
    """``1 - log(1 + gamma (rank - 1)) / log(1 + gamma (n - 1))``: 1 at the top, 0 at rank n;
    1.0 when ``n == 1``. ``gamma`` (> 0) sets how fast the score falls.

    Example:
        >>> log_rank_score(1, 5), round(log_rank_score(3, 5), 4), log_rank_score(5, 5)
        (1.0, 0.3174, 0.0)
    """
    if rank < 1 or n < 1 or rank > n:
        raise MetricError(f"need 1 <= rank <= n, got rank={rank}, n={n}")
    return float(M.log_rank_score(rank, n, gamma))


def hybrid_log_rank_score(retrieved: Sequence[Hashable], relevant: Relevant, gamma: float = 1.0,
                          alpha: float = 0.5) -> float:
    """Hybrid log-rank score (datapizza): ``alpha * recall + (1 - alpha) * rank_quality``.

    ``recall = |relevant ∩ retrieved| / |relevant|``; ``rank_quality`` is the sum of
    :func:`log_rank_score` over relevant retrieved items (rank of first occurrence, ``n`` =
    length of the retrieved list) divided by ``|relevant|``. In [0, 1]; 0.0 for an empty
    retrieved list; ``NaN`` when there is no relevant item. ``gamma <= 0`` is an error.

    Example:
        >>> round(hybrid_log_rank_score(["a", "x", "b"], {"a", "b"}), 4)
        0.75
    """
    return _f(M.hybrid_log_rank(_one(retrieved, relevant), gamma, alpha))


# datapizza names: exact match of chunk strings
def precision_at_k_exact(retrieved_chunks: Sequence[str], ground_truth_chunks: Sequence[str], k: int) -> float:
    """:func:`precision_at_k` with chunks compared as exact strings (datapizza)."""
    return precision_at_k(retrieved_chunks, ground_truth_chunks, k)


def recall_at_k_exact(retrieved_chunks: Sequence[str], ground_truth_chunks: Sequence[str], k: int) -> float:
    """:func:`recall_at_k` with chunks compared as exact strings (datapizza)."""
    return recall_at_k(retrieved_chunks, ground_truth_chunks, k)


def f1_at_k_exact(retrieved_chunks: Sequence[str], ground_truth_chunks: Sequence[str], k: int) -> float:
    """:func:`f1_at_k` with chunks compared as exact strings (datapizza)."""
    return f1_at_k(retrieved_chunks, ground_truth_chunks, k)


def hybrid_log_rank_score_exact(retrieved_chunks: Sequence[str], ground_truth_chunks: Sequence[str],
                                gamma: float = 1.0, alpha: float = 0.5) -> float:
    """:func:`hybrid_log_rank_score` with chunks compared as exact strings (datapizza)."""
    return hybrid_log_rank_score(retrieved_chunks, ground_truth_chunks, gamma, alpha)


def precision_at_k_similarity(retrieved_embeddings: Any, ground_truth_embeddings: Any, k: int,
                              similarity_threshold: float = 0.8) -> float:
    """Precision at k where a retrieved chunk is relevant when its cosine similarity with a
    ground-truth chunk is at least ``similarity_threshold`` (datapizza).

    A retrieved chunk that matches only ground-truth chunks already matched higher up (a
    near-duplicate) counts once, like an exact duplicate. Embeddings need not be normalised.

    Example:
        >>> e = np.eye(3)
        >>> precision_at_k_similarity([e[0], e[2], e[1]], [e[0], e[1]], k=2)
        0.5
    """
    return _f(M.precision(_one_similarity(retrieved_embeddings, ground_truth_embeddings,
                                          similarity_threshold), k))


def recall_at_k_similarity(retrieved_embeddings: Any, ground_truth_embeddings: Any, k: int,
                           similarity_threshold: float = 0.8) -> float:
    """Share of ground-truth chunks with a retrieved chunk among the first ``k`` whose cosine
    similarity reaches ``similarity_threshold`` (datapizza); ``NaN`` without ground truth.

    Example:
        >>> e = np.eye(3)
        >>> recall_at_k_similarity([e[0], e[2], e[1]], [e[0], e[1]], k=2)
        0.5
    """
    return _f(M.recall(_one_similarity(retrieved_embeddings, ground_truth_embeddings,
                                       similarity_threshold), k))


def f1_at_k_similarity(retrieved_embeddings: Any, ground_truth_embeddings: Any, k: int,
                       similarity_threshold: float = 0.8) -> float:
    """F1 of :func:`precision_at_k_similarity` and :func:`recall_at_k_similarity` (datapizza)."""
    return _f(M.f1(_one_similarity(retrieved_embeddings, ground_truth_embeddings,
                                   similarity_threshold), k))


def hybrid_log_rank_score_similarity(retrieved_embeddings: Any, ground_truth_embeddings: Any,
                                     similarity_threshold: float = 0.8, gamma: float = 1.0,
                                     alpha: float = 0.5) -> float:
    """Hybrid log-rank score where a ground-truth chunk is recalled when a retrieved chunk reaches
    the similarity threshold, at the best such rank (datapizza's hybrid score)."""
    return _f(M.hybrid_log_rank(_one_similarity(retrieved_embeddings, ground_truth_embeddings,
                                                similarity_threshold), gamma, alpha))


def _spans(xs: Iterable[Span | Chunk]) -> list[Span]:
    out = []
    for x in xs:
        if isinstance(x, Chunk):
            if not x.has_span:
                raise MetricError("span metrics need source, start and end on every chunk")
            out.append(span_of(x))
        else:
            src, s, e = x
            if e < s:
                raise MetricError(f"span end {e} is before start {s}")
            out.append((str(src), int(s), int(e)))
    return out


def span_precision(retrieved: Iterable[Span | Chunk], relevant: Iterable[Span | Chunk]) -> float:
    """Character precision: how much of the retrieved text was needed.

    ``|chars(retrieved) ∩ chars(relevant)| / |chars(retrieved)|`` where chars() is the union of
    character positions per source (overlapping spans count once). 0.0 when nothing (or only
    empty spans) was retrieved; ``NaN`` when there is no relevant span.

    Example:
        >>> span_precision([("doc", 0, 100)], [("doc", 50, 150)])
        0.5
    """
    r, g, both = matching.span_overlap(_spans(retrieved), _spans(relevant))
    if g == 0:
        return float("nan")
    return both / r if r else 0.0


def span_recall(retrieved: Iterable[Span | Chunk], relevant: Iterable[Span | Chunk]) -> float:
    """Character recall: how much of the relevant text was retrieved,
    ``|chars(retrieved) ∩ chars(relevant)| / |chars(relevant)|``; ``NaN`` without relevant text.

    Example:
        >>> span_recall([("doc", 0, 100)], [("doc", 50, 150)])
        0.5
    """
    r, g, both = matching.span_overlap(_spans(retrieved), _spans(relevant))
    return both / g if g else float("nan")


def span_iou(retrieved: Iterable[Span | Chunk], relevant: Iterable[Span | Chunk]) -> float:
    """Character intersection over union of retrieved and relevant text; ``NaN`` without
    relevant text.

    Example:
        >>> round(span_iou([("doc", 0, 100)], [("doc", 50, 150)]), 4)
        0.3333
    """
    r, g, both = matching.span_overlap(_spans(retrieved), _spans(relevant))
    if g == 0:
        return float("nan")
    return both / (r + g - both)


# ============================================================================ registered metrics
_MATCH_DEFAULTS: dict[str, Any] = {"match": "auto", "span_threshold": 0.5, "similarity_threshold": 0.8,
                                   "embedding_model": None}
_CACHE_SIZE = 16


def _batch_match(samples: Sequence[Sample], ctx: Any, match: str, span_threshold: float,
                 similarity_threshold: float, embedding_model: str | None) -> matching.BatchMatch:
    """Match a batch once per rule: the result is cached on the context for the other metrics of
    the run that score the same samples with the same rule."""
    cache: OrderedDict[Any, matching.BatchMatch] | None = None
    key = None
    if ctx is not None:
        cache = ctx.__dict__.setdefault("_retrieval_cache", OrderedDict())
        key = (tuple(s.id for s in samples), match, float(span_threshold), float(similarity_threshold),
               embedding_model if match in ("similarity",) else None)
        hit = cache.get(key)
        if hit is not None and len(hit.reasons) == len(samples):
            cache.move_to_end(key)
            return hit
    embed = None
    if match == "similarity":
        if ctx is None:
            raise MetricError("the similarity rule needs a scoring context with the embeddings service")
        svc = ctx.service("embeddings")

        def embed(texts: list[str]) -> np.ndarray:
            return svc.matrix(texts, model=embedding_model)

    result = matching.match_samples(samples, match, span_threshold=span_threshold,
                                    similarity_threshold=similarity_threshold, embed=embed)
    if cache is not None:
        cache[key] = result
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return result


def _pure_for(params: Mapping[str, Any]) -> bool:
    """A retrieval metric is pure (another process may score it) unless it matches chunks by
    embedding similarity: then its ``prepare`` asks the embedding service for their vectors."""
    return params.get("match") != "similarity"


def _prepare(samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
    if params.get("match") == "similarity":
        texts = {c.text for s in samples for c in (s.contexts or []) + (s.relevant or []) if c.text is not None}
        ctx.service("embeddings").request(sorted(texts), model=params.get("embedding_model"))


def _make(measure: str, needs_relevant: bool) -> Any:
    def fn(samples: Sequence[Sample], ctx: Any, *, match: str = "auto", span_threshold: float = 0.5,
           similarity_threshold: float = 0.8, embedding_model: str | None = None, **params: Any) -> list[Score]:
        bm = _batch_match(samples, ctx, match, span_threshold, similarity_threshold, embedding_model)
        m = bm.matrix
        values = _MEASURES[measure](m, **params)
        out: list[Score] = []
        n_rel = m.n_rel
        for i, reason in enumerate(bm.reasons):
            if reason is not None:
                out.append(Score.missing(reason))
            elif needs_relevant and n_rel[i] == 0:
                out.append(Score.missing(NO_RELEVANT))
            else:
                v = float(values[i])
                out.append(Score.missing(NO_RELEVANT) if v != v else Score(v))
        return out

    fn.__name__ = f"_{measure}_batch"
    return fn


def _hit(m: RelevanceMatrix, k: int) -> np.ndarray:
    return M.hit_rate(m, k)


_MEASURES = {
    "precision": lambda m, k: M.precision(m, k),
    "recall": lambda m, k: M.recall(m, k),
    "f1": lambda m, k: M.f1(m, k),
    "hit_rate": _hit,
    "mrr": lambda m, k=None: M.reciprocal_rank(m, k),
    "map": lambda m, k=None: M.average_precision(m, k),
    "r_precision": lambda m: M.r_precision(m),
    "ndcg": lambda m, k=10, gain="exponential": M.ndcg(m, k, gain),
    "hybrid_log_rank": lambda m, gamma=1.0, alpha=0.5: M.hybrid_log_rank(m, gamma, alpha),
}


def _check_params(**params: Any) -> str | None:
    try:
        matching.check_rule(params.get("match", "auto"), params.get("span_threshold", 0.5),
                            params.get("similarity_threshold", 0.8))
        if "k" in params and params["k"] is not None:
            M._k(params["k"])
        if "gamma" in params and not params["gamma"] > 0:
            raise MetricError(f"gamma must be > 0, got {params['gamma']!r}")
        if "alpha" in params and not 0 <= params["alpha"] <= 1:
            raise MetricError(f"alpha must be in [0, 1], got {params['alpha']!r}")
        if "gain" in params and params["gain"] not in M.GAINS:
            raise MetricError(f"gain must be one of {M.GAINS}, got {params['gain']!r}")
    except MetricError as exc:
        return str(exc)
    return None


def _checker(ctx: Any, **params: Any) -> str | None:
    return _check_params(**params)


_DESCRIPTIONS = {
    "precision": "Precision at k: share of the first k retrieved chunks that are relevant, "
                 "|relevant in top k| / k (k is not reduced for shorter lists; 0 when nothing is "
                 "relevant).",
    "recall": "Recall at k: share of the relevant chunks found in the first k retrieved, "
              "|relevant found in top k| / |relevant|.",
    "f1": "F1 at k: harmonic mean of precision@k and recall@k, 2PR/(P+R).",
    "hit_rate": "Hit rate at k: 1 when a relevant chunk is among the first k retrieved, else 0 "
                "(trec_eval success_k).",
    "mrr": "Reciprocal rank: 1 / rank of the first relevant retrieved chunk (0 if none; within k "
           "when given); its mean is MRR.",
    "map": "Average precision: (1/R) * sum of precision at the rank of each relevant retrieved "
           "chunk (within k when given, as trec_eval map_cut); its mean is MAP.",
    "r_precision": "R-precision: precision at rank R, the number of relevant chunks.",
    "ndcg": "nDCG at k with graded relevance (Chunk.grade, default 1): DCG@k / ideal DCG@k, "
            "DCG = sum gain(grade)/log2(rank+1); gain 2^grade-1 (exponential, Burges et al.'s gain, default) "
            "or grade (linear, trec_eval).",
    "hybrid_log_rank": "Hybrid log-rank score (datapizza): alpha*recall + (1-alpha)*rank quality, "
                       "rank quality = sum over relevant retrieved chunks of 1 - log(1+gamma(rank-1))"
                       "/log(1+gamma(n-1)), divided by |relevant|.",
}


def _register(name: str, measure: str, *, param: str | None, defaults: dict[str, Any],
              aliases: tuple[str, ...] = (), needs_relevant: bool = True) -> None:
    register_metric(MetricSpec(
        name=name, family="retrieval", fn=_make(measure, needs_relevant),
        requires=("contexts", "relevant"), range=(0.0, 1.0), higher_is_better=True,
        defaults={**defaults, **_MATCH_DEFAULTS}, param=param, prepare=_prepare, pure_for=_pure_for, check=_checker,
        batch_size=5000, description=_DESCRIPTIONS[measure], aliases=aliases))


_register("precision", "precision", param="k", defaults={"k": 10},
          aliases=("precision_at_k",), needs_relevant=False)
_register("recall", "recall", param="k", defaults={"k": 10}, aliases=("recall_at_k",))
_register("f1", "f1", param="k", defaults={"k": 10}, aliases=("f1_at_k",))
_register("hit_rate", "hit_rate", param="k", defaults={"k": 10}, aliases=("hit_rate_at_k",))
_register("mrr", "mrr", param="k", defaults={"k": None},
          aliases=("reciprocal_rank", "mean_reciprocal_rank"))
_register("map", "map", param="k", defaults={"k": None}, aliases=("average_precision",))
_register("r_precision", "r_precision", param=None, defaults={}, aliases=("rprec",))
_register("ndcg", "ndcg", param="k", defaults={"k": 10, "gain": "exponential"}, aliases=("ndcg_at_k",))
_register("hybrid_log_rank", "hybrid_log_rank", param=None, defaults={"gamma": 1.0, "alpha": 0.5},
          aliases=("hybrid_log_rank_score",))


# ------------------------------------------------------------------ span metrics (characters)
def _span_batch(kind: str) -> Any:
    def fn(samples: Sequence[Sample], ctx: Any, *, k: int | None = None) -> list[Score]:
        if k is not None:
            M._k(k)
        out: list[Score] = []
        for s in samples:
            ctx_chunks = list(s.contexts or [])[:k] if k else list(s.contexts or [])
            rel = list(s.relevant or [])
            if any(not c.has_span for c in ctx_chunks + rel):
                out.append(Score.missing("span metrics need source/start/end on every chunk"))
                continue
            r, g, both = matching.span_overlap([span_of(c) for c in ctx_chunks],
                                               [span_of(c) for c in rel if matching.grade_of(c) > 0])
            details = {"retrieved_chars": r, "relevant_chars": g, "overlap_chars": both}
            if g == 0:
                out.append(Score.missing(NO_RELEVANT, details))
            elif kind == "precision":
                out.append(Score(both / r if r else 0.0, None, details))
            elif kind == "recall":
                out.append(Score(both / g, None, details))
            else:
                out.append(Score(both / (r + g - both), None, details))
        return out

    fn.__name__ = f"_span_{kind}_batch"
    return fn


_SPAN_DESCRIPTIONS = {
    "precision": "Character-level span precision: characters of the retrieved spans that fall in "
                 "relevant spans / characters retrieved (per source; overlapping spans count once).",
    "recall": "Character-level span recall: characters of the relevant spans covered by retrieved "
              "spans / relevant characters.",
    "iou": "Character-level span IoU: |retrieved ∩ relevant| / |retrieved ∪ relevant| characters.",
}
for _kind in ("precision", "recall", "iou"):
    register_metric(MetricSpec(
        name=f"span_{_kind}", family="retrieval", fn=_span_batch(_kind), requires=("contexts", "relevant"),
        range=(0.0, 1.0), defaults={"k": None}, param="k", batch_size=5000,
        description=_SPAN_DESCRIPTIONS[_kind]))
