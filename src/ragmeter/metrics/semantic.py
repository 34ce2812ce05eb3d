"""Semantic metrics: cosine similarity of sentence embeddings (rag-experiment-accelerator's ``bert_*`` keys).

Every text a run needs is embedded once by the run's ``embeddings`` service; each metric is then
a gather and a row-wise dot product over L2-normalised rows. Embedding similarity is topical, not
factual ("...is London" vs "...is Paris" is about 0.84): see ``docs/metrics/semantic.md`` and
:func:`separation_report` before turning a similarity into a right/wrong verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.embed.models import BERT_MODELS, EmbeddingError, ModelUnavailableError
from ragmeter.embed.service import is_blank
from ragmeter.metrics.registry import MetricSpec, register_metric

# ---- kernels ----------------------------------------------------------------------------------


def _best_per_group(sims: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max and (first) argmax within consecutive groups of ``sims``; an empty group gives NaN, -1."""
    n = sizes.size
    best = np.full(n, np.nan)
    arg = np.full(n, -1, dtype=np.int64)
    nonempty = sizes > 0
    if sims.size == 0:
        return best, arg
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    best[nonempty] = np.maximum.reduceat(sims, starts[nonempty])
    group = np.repeat(np.arange(n), sizes)
    pos = np.arange(sims.size) - starts[group]
    candidates = np.where(sims == best[group], pos, np.iinfo(np.int64).max)
    arg[nonempty] = np.minimum.reduceat(candidates, starts[nonempty])
    return best, arg


def best_match_cosine(queries: np.ndarray, candidates: np.ndarray, sizes: Sequence[int] | np.ndarray,
                      query_blank: np.ndarray | None = None,
                      candidate_blank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the highest cosine with its own group of candidate rows.

    ``candidates`` holds the groups one after another: the first ``sizes[0]`` rows belong to query
    0, and so on. Rows must be unit length (blank texts: all-zero rows, cosine 0 with anything);
    two blank texts count as identical (cosine 1).

    Returns:
        ``(best, index)``: the raw cosine in [-1, 1] (NaN for an empty group) and the position of
        the best candidate inside its group (-1 for an empty group).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    owner = np.repeat(np.arange(sizes.size), sizes)
    sims = np.einsum("ij,ij->i", queries[owner], candidates).astype(np.float64)
    if query_blank is not None and candidate_blank is not None and sims.size:
        sims[np.asarray(query_blank)[owner] & np.asarray(candidate_blank)] = 1.0
    return _best_per_group(sims, sizes)


def _encode_matrix(encoder: Any, texts: list[str]) -> np.ndarray:
    """Rows for ``texts`` from an encoder, each distinct non-blank text embedded once."""
    unique = list(dict.fromkeys(t for t in texts if not is_blank(t)))
    x = encoder.encode(unique) if unique else np.zeros((0, encoder.dim), dtype=np.float32)
    dim = x.shape[1] if unique else encoder.dim
    out = np.zeros((len(texts), dim), dtype=np.float32)
    index = {t: i for i, t in enumerate(unique)}
    rows = np.array([index.get(t, -1) for t in texts], dtype=np.int64)
    mask = rows >= 0
    out[mask] = x[rows[mask]]
    return out


def _check_texts(name: str, values: Sequence[Any]) -> None:
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise MetricError(f"{name}[{i}] must be a string, got {type(v).__name__}")


def _groups(name: str, values: Sequence[str | Sequence[str]], n: int, *, allow_empty: bool) -> list[list[str]]:
    if len(values) != n:
        raise MetricError(f"got {n} answers but {len(values)} {name}: one entry per answer is needed")
    out = [[v] if isinstance(v, str) else list(v) for v in values]
    for i, g in enumerate(out):
        if not g and not allow_empty:
            raise MetricError(f"{name}[{i}] is empty: give at least one text per answer")
        _check_texts(f"{name}[{i}]", g)
    return out


def _best_match(answers: Sequence[str], groups: list[list[str]], model: str | None,
                encoder: Any, blank_match: bool) -> np.ndarray:
    from ragmeter.embed import get_encoder

    enc = encoder if encoder is not None else get_encoder(model)
    flat = [t for g in groups for t in g]
    q = _encode_matrix(enc, list(answers))
    c = _encode_matrix(enc, flat)
    blanks = (np.array([is_blank(a) for a in answers], dtype=bool),
              np.array([is_blank(t) for t in flat], dtype=bool)) if blank_match else (None, None)
    best, _ = best_match_cosine(q, c, [len(g) for g in groups], *blanks)
    return best


# ---- public per-metric functions ------------------------------------------------------------------


def semantic_similarity(answers: Sequence[str], references: Sequence[str | Sequence[str]], *,
                        model: str | None = None, encoder: Any = None) -> np.ndarray:
    """Cosine similarity of answer and reference embeddings; the best of several references.

    ``sim(a, R) = max_{r in R} max(0, e(a) . e(r))`` where ``e`` is the model's L2-normalised
    sentence embedding (mean pooling for all-MiniLM-L6-v2, inputs truncated to the model's
    ``max_seq_length``, 256 word pieces for the default).

    Range [0, 1], higher is better. A negative cosine (texts pointing in opposite directions, rare
    with these models) is reported as 0: "unrelated" and "opposed" are the same verdict here.
    rag-experiment-accelerator reports ``int(100 * cosine)``; this is the unrounded cosine on a 0-1 scale.

    Edge cases: a blank (whitespace-only) answer or reference has no meaning and scores 0 against
    any non-blank text, 1 against another blank text. Identical texts score 1 (up to float
    rounding, which is clipped).

    Args:
        answers: generated answers.
        references: per answer, one reference string or a list of them (at least one).
        model: embedding model name (default: the bundled all-MiniLM-L6-v2); see
            :func:`ragmeter.embed.resolve_model`.
        encoder: an already loaded :class:`ragmeter.embed.Encoder` (overrides ``model``).

    Returns:
        float64 array of shape ``(len(answers),)``.

    Raises:
        MetricError: lengths differ, an entry is not a string, or an answer has no reference.
        ModelUnavailableError: the model is not available locally.

    Example:
        >>> semantic_similarity(["The capital of France is Paris"],
        ...                     [["Paris is France's capital city", "Lyon"]])  # doctest: +SKIP
        array([0.9...])
    """
    _check_texts("answers", answers)
    groups = _groups("references", references, len(answers), allow_empty=False)
    return np.clip(_best_match(answers, groups, model, encoder, True), 0.0, 1.0)


def context_similarity(answers: Sequence[str], contexts: Sequence[Sequence[str]], *,
                       model: str | None = None, encoder: Any = None) -> np.ndarray:
    """How close the answer is, in embedding space, to the closest retrieved context.

    ``sim(a, C) = max_{c in C} max(0, e(a) . e(c))``: a cheap, topical proxy for "the answer talks
    about what was retrieved". It does not check facts (an LLM faithfulness judge does). Long
    contexts are truncated to the model's ``max_seq_length`` before embedding.

    Range [0, 1], higher is better. An empty retrieval (no contexts) scores 0: no retrieved text
    supports the answer. A blank answer or a blank context has no meaning: cosine 0.

    Args:
        answers: generated answers.
        contexts: per answer, the retrieved context texts (may be empty).
        model: embedding model name (default: the bundled all-MiniLM-L6-v2).
        encoder: an already loaded encoder (overrides ``model``).

    Returns:
        float64 array of shape ``(len(answers),)``.

    Raises:
        MetricError: lengths differ or an entry is not a string.
    """
    _check_texts("answers", answers)
    groups = _groups("contexts", contexts, len(answers), allow_empty=True)
    best = _best_match(answers, groups, model, encoder, False)
    return np.clip(np.nan_to_num(best, nan=0.0), 0.0, 1.0)


# ---- batch metrics (the runner's interface) -------------------------------------------------------


def _answer_reference_texts(samples: Sequence[Sample]) -> list[str]:
    texts: list[str] = []
    for s in samples:
        texts.append(s.answer or "")
        texts.extend(s.references)
    return texts


def _prepare_references(samples: Sequence[Sample], ctx: Any, model: str | None = None) -> None:
    ctx.service("embeddings").request(_answer_reference_texts(samples), model)


def _prepare_contexts(samples: Sequence[Sample], ctx: Any, model: str | None = None) -> None:
    texts = [s.answer or "" for s in samples]
    for s in samples:
        texts.extend(s.context_texts)
    ctx.service("embeddings").request(texts, model)


def _score_best_match(samples: Sequence[Sample], ctx: Any, model: str | None, groups: list[list[str]],
                      what: str, empty_value: float | None, blank_match: bool) -> list[Score]:
    svc = ctx.service("embeddings")
    answers = [s.answer or "" for s in samples]
    flat = [t for g in groups for t in g]
    try:
        q = svc.matrix(answers, model)
        c = svc.matrix(flat, model)
    except (ModelUnavailableError, EmbeddingError) as exc:
        return [Score.missing(f"unavailable: {exc}")] * len(samples)
    blanks = (np.array([is_blank(a) for a in answers], dtype=bool),
              np.array([is_blank(t) for t in flat], dtype=bool)) if blank_match else (None, None)
    best, arg = best_match_cosine(q, c, [len(g) for g in groups], *blanks)
    out: list[Score] = []
    for i, g in enumerate(groups):
        if not g:
            out.append(Score(empty_value, None, {f"n_{what}s": 0}) if empty_value is not None
                       else Score.missing(f"no {what}"))
            continue
        raw = float(best[i])
        details: dict[str, Any] = {}
        if raw < 0:
            details["cosine"] = raw
        if len(g) > 1:
            details[f"best_{what}"] = int(arg[i])
        out.append(Score(min(max(raw, 0.0), 1.0), None, details or None))
    return out


def _semantic_similarity_metric(samples: Sequence[Sample], ctx: Any, model: str | None = None) -> list[Score]:
    return _score_best_match(samples, ctx, model, [list(s.references) for s in samples], "reference", None,
                             blank_match=True)


def _context_similarity_metric(samples: Sequence[Sample], ctx: Any, model: str | None = None) -> list[Score]:
    return _score_best_match(samples, ctx, model, [s.context_texts for s in samples], "context", 0.0,
                             blank_match=False)


register_metric(MetricSpec(
    name="semantic_similarity", family="semantic", fn=_semantic_similarity_metric,
    requires=("answer", "reference"), range=(0.0, 1.0), needs_embeddings=True,
    defaults={"model": None}, param="model", prepare=_prepare_references,
    description=semantic_similarity.__doc__ or ""))

register_metric(MetricSpec(
    name="context_similarity", family="semantic", fn=_context_similarity_metric,
    requires=("answer", "context_texts"), range=(0.0, 1.0), needs_embeddings=True,
    defaults={"model": None}, param="model", prepare=_prepare_contexts,
    description=context_similarity.__doc__ or ""))


def _bert_description(key: str, repo: str) -> str:
    return (f"rag-experiment-accelerator's `{key}`: cosine similarity of answer and reference embeddings under "
            f"{repo}, best of several references, negatives reported as 0 (range 0-1; rag-experiment-accelerator shows "
            f"int(100 * cosine)). Needs the model locally (bert_all_MiniLM_L6_v2 is bundled); "
            f"otherwise no value, with how to provide it.\n\n" + (semantic_similarity.__doc__ or ""))


for _key, _repo in BERT_MODELS.items():
    register_metric(MetricSpec(
        name=_key, family="semantic", fn=partial(_semantic_similarity_metric, model=_repo),
        requires=("answer", "reference"), range=(0.0, 1.0), needs_embeddings=True,
        prepare=partial(_prepare_references, model=_repo), description=_bert_description(_key, _repo)))


# ---- how well a similarity separates right from wrong ---------------------------------------------


def roc_auc(scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray) -> float:
    """Area under the ROC curve: the probability that a random correct item scores higher than a
    random wrong one (ties count one half), i.e. the Mann-Whitney U statistic / (n_pos * n_neg).

    Raises:
        MetricError: lengths differ, or the labels are not both present.
    """
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    if s.shape != y.shape:
        raise MetricError(f"{s.size} scores but {y.size} labels")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise MetricError("ROC AUC needs both correct and wrong labels")
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def best_threshold(scores: Sequence[float] | np.ndarray,
                   labels: Sequence[int | bool] | np.ndarray) -> tuple[float, float]:
    """The threshold ``t`` maximising the accuracy of "correct iff score >= t", and that accuracy.

    Every distinct score is tried, and ``+inf`` (everything wrong); ties go to the lowest ``t``.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    if s.size == 0:
        raise MetricError("best_threshold needs at least one score")
    cand = np.append(np.unique(s), np.inf)
    pos = np.sort(s[y])
    neg = np.sort(s[~y])
    tp = pos.size - np.searchsorted(pos, cand, side="left")  # positives with s >= t
    tn = np.searchsorted(neg, cand, side="left")  # negatives with s < t
    acc = (tp + tn) / s.size
    i = int(np.argmax(acc))
    return float(cand[i]), float(acc[i])


def separation_report(similarities: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray, *,
                      fixed: Sequence[float] = (0.70, 0.75), folds: int = 10) -> dict[str, Any]:
    """How well a similarity separates right answers (label >= 0.5) from wrong ones.

    Returns ``n``, ``n_correct``, ``roc_auc``, ``best_threshold`` and ``best_accuracy`` (the
    threshold chosen on the same data: optimistic), ``cv_accuracy`` (the threshold chosen on the
    other folds, applied to the held-out one: what to expect on new data), ``majority_accuracy``
    (always answering the majority class), and ``accuracy_at`` each ``fixed`` threshold.
    Folds are interleaved (item ``i`` in fold ``i % folds``), so the report is deterministic.
    """
    s = np.asarray(similarities, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64) >= 0.5
    if s.shape != y.shape:
        raise MetricError(f"{s.size} similarities but {y.size} labels")
    if s.size < 2 or folds < 2:
        raise MetricError("separation_report needs at least two items and two folds")
    t, acc = best_threshold(s, y)
    k = min(folds, s.size)
    fold = np.arange(s.size) % k
    hits = 0
    for f in range(k):
        train = fold != f
        tf, _ = best_threshold(s[train], y[train])
        hits += int(((s[~train] >= tf) == y[~train]).sum())
    return {
        "n": int(s.size), "n_correct": int(y.sum()), "roc_auc": roc_auc(s, y),
        "best_threshold": t, "best_accuracy": acc, "cv_accuracy": hits / s.size, "cv_folds": k,
        "majority_accuracy": float(max(y.mean(), 1 - y.mean())),
        "accuracy_at": {f"{x:g}": float(((s >= x) == y).mean()) for x in fixed},
    }
