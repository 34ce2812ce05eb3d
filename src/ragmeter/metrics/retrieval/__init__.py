"""Retrieval metrics: precision/recall/F1/hit rate@k, MRR, MAP, R-precision, nDCG, the hybrid
log-rank score, character-level span precision/recall/IoU, and trec_eval on TREC files.

The package, by concept:

* :mod:`.ranking` -- the plain functions over one ranked list (``precision_at_k(retrieved,
  relevant, k)``, ``ndcg_at_k`` with graded relevance, ``span_iou`` ..., all importable from here)
  and the registered batch metrics (``precision@5``, ``ndcg@10``, ``mrr``, ``map`` ...);
* :mod:`.matching` -- which retrieved chunk is relevant (ids, texts, spans, embeddings);
* :mod:`.relevance` -- :class:`~ragmeter.metrics.retrieval.relevance.RelevanceMatrix`, the rank at
  which every judged item was first retrieved, for a batch of queries;
* :mod:`.measures` -- every ranking measure as a numpy reduction of that matrix;
* :mod:`.trec_measures` -- trec_eval's measures (names, cutoffs, each query's values, the
  averages); the trec_eval drop-in on qrels and run files, dicts and DataFrames is
  :mod:`ragmeter.apps.trec` (``ragmeter trec``, :func:`ragmeter.apps.trec.evaluate`).

See ``docs/metrics/retrieval.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "average_precision", "dcg_at_k", "f1_at_k", "f1_at_k_exact", "f1_at_k_similarity", "hit_rate_at_k",
    "hybrid_log_rank_score", "hybrid_log_rank_score_exact", "hybrid_log_rank_score_similarity",
    "log_rank_score", "mean_reciprocal_rank", "ndcg_at_k", "precision_at_k", "precision_at_k_exact",
    "precision_at_k_similarity", "r_precision", "recall_at_k", "recall_at_k_exact",
    "recall_at_k_similarity", "reciprocal_rank", "span_iou", "span_precision", "span_recall",
]


def __getattr__(name: str) -> Any:
    # the plain functions (and the registration of the batch metrics) load on first use, so that
    # ``ragmeter trec`` reads its files without the registry and the schema
    if name in __all__:
        from ragmeter.metrics.retrieval import ranking

        return getattr(ranking, name)
    raise AttributeError(f"module 'ragmeter.metrics.retrieval' has no attribute {name!r}")
