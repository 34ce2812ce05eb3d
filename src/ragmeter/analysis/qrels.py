"""LLM relevance labels (qrels) outside a run: judged with a judge client and kept in a store, or
read back from the store alone.

Labels live in the store's key-value table (namespace ``llm_qrels``, :mod:`ragmeter.store.relevance_labels`)
under ``sha256(question) : sha256(chunk text) : judge model``, so the same chunk is never judged
twice for the same question, whichever run or retrieval configuration retrieved it. They turn into
ranking ground truth with :func:`fill_relevant`: ``Sample.relevant`` becomes the graded chunks, and
any retrieval metric (nDCG, MAP, MRR) can run on them. Inside a metric the same labels come from
the scoring context (:mod:`ragmeter.metrics.judge.relevance_labels`).

Entry points::

    labels = llm_relevance_labels(samples, judge, store)      # [[Label | None per context], ...]
    labels = stored_labels(samples, store, "openai:gpt-4o-mini")  # the same, from the store only
    filled = fill_relevant(samples, labels, min_grade=1)       # Samples with graded `relevant`
    filled = fill_relevant_from_llm(samples, ctx)              # both, inside a metric
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.core.schema import Chunk, Sample
from ragmeter.metrics.judge import relevance_labels as _labels
from ragmeter.metrics.judge.relevance_labels import (
    MAX_CHUNKS_PER_CALL,
    METRIC,
    Label,
    fill_relevant,
    fill_relevant_from_llm,
    label_schema,
    qrel_key,
)
from ragmeter.store.relevance_labels import NAMESPACE, RelevanceLabelStore

__all__ = ["MAX_CHUNKS_PER_CALL", "METRIC", "NAMESPACE", "Label", "fill_relevant", "fill_relevant_from_llm",
           "label_schema", "llm_relevance_labels", "plan_labels", "pooled_relevant", "prefetch_labels",
           "qrel_key", "resolve_labels", "stored_labels"]


def plan_labels(samples: Sequence[Sample], judge: Any, store: Any = None, *, use_reference: bool = True,
                metric: str = METRIC) -> Any:
    """Which (question, chunk) pairs still need a label in ``store``, and the judge requests that ask for them."""
    return _labels.plan_labels(samples, judge, RelevanceLabelStore(store), use_reference=use_reference, metric=metric)


def prefetch_labels(samples: Sequence[Sample], judge: Any, store: Any = None, *, use_reference: bool = True) -> None:
    """Queue the label requests of ``samples`` that ``store`` does not hold on the judge."""
    _labels.prefetch_labels(samples, judge, RelevanceLabelStore(store), use_reference=use_reference)


def resolve_labels(samples: Sequence[Sample], judge: Any, store: Any = None, *,
                   use_reference: bool = True) -> tuple[list[list[Label | None]], list[str | None]]:
    """:func:`llm_relevance_labels` plus, per sample, why a label is missing (``None`` if complete)."""
    return _labels.resolve_labels(samples, judge, RelevanceLabelStore(store), use_reference=use_reference)


def llm_relevance_labels(samples: Sequence[Sample], judge: Any, store: Any = None, *,
                         use_reference: bool = True) -> list[list[Label | None]]:
    """Graded relevance (0-3) of every retrieved chunk of every sample, judged by an LLM.

    Labels already in ``store`` are reused; missing ones are asked for in one judge call per
    sample (up to 20 chunks per call), then stored. A chunk whose label could not be obtained
    (judge failure, budget, dry run) is ``None``.

    Args:
        samples: samples with ``question`` and ``contexts`` (chunk texts).
        judge: a :class:`~ragmeter.llm.JudgeService` (``ctx.service("judge")``).
        store: the store holding the labels (``None``: judge everything, keep nothing).
        use_reference: show the reference answer to the judge when the sample has one.

    Returns:
        Per sample, one :class:`Label` (or ``None``) per context, in retrieval order.
    """
    return resolve_labels(samples, judge, store, use_reference=use_reference)[0]


def stored_labels(samples: Sequence[Sample], store: Any, judge_model: str) -> list[list[Label | None]]:
    """The labels already in ``store`` for each sample's chunks (``None`` where a chunk was never
    judged), without any judge: ``judge_model`` is ``"provider:model"``, e.g. ``"openai:gpt-4o-mini"``.
    """
    keys = [[qrel_key(s.question or "", t, judge_model) for t in s.context_texts] for s in samples]
    known = RelevanceLabelStore(store).get_many(sorted({k for ks in keys for k in ks}))
    return [[Label(int(known[k]["grade"]), str(known[k].get("reason", "")), cached=True) if k in known else None
             for k in ks] for ks in keys]


def pooled_relevant(samples: Sequence[Sample], judge: Any, store: Any) -> list[list[Chunk]]:
    """Per sample, every chunk labelled for its question by this judge in any run of ``store``
    (TREC-style pooling), as graded chunks."""
    return _labels.pooled_relevant(samples, judge, RelevanceLabelStore(store))
