"""Corpus-level BLEU and chrF of a run, with a bootstrap interval over segments.

A run's ``bleu`` / ``chrf`` is the *mean of sentence scores*; what machine-translation users call
BLEU is the corpus score: n-gram matches and lengths summed over every segment first, then one
score (``sacrebleu.BLEU().corpus_score``). The two differ (a corpus BLEU is not the average of
sentence BLEUs). :func:`add_corpus_scores` puts the corpus score beside the sentence mean in the
run summary, on the same 0-1 scale: ``corpus_score``, ``corpus_ci_low``, ``corpus_ci_high``
(percentile bootstrap over segments: resample the segments, sum their sacrebleu sufficient
statistics, recompute the score; 1000 resamples, fixed seed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: metric name -> sacrebleu class name; the corpus score is added for these
CORPUS_METRICS = {"bleu": "BLEU", "bleu2": "BLEU", "chrf": "CHRF"}
N_RESAMPLES = 1000
SEED = 20261123


def _scorer(name: str, params: Mapping[str, Any]) -> Any:
    from sacrebleu.metrics import BLEU, CHRF

    if CORPUS_METRICS[name] == "BLEU":
        return BLEU(max_ngram_order=params.get("max_ngram_order", 4),
                    smooth_method=params.get("smooth_method", "exp"),
                    smooth_value=params.get("smooth_value"), lowercase=params.get("lowercase", False),
                    tokenize=params.get("tokenize", "13a"), effective_order=False)
    return CHRF(char_order=params.get("char_order", 6), word_order=params.get("word_order", 0),
                beta=params.get("beta", 2), lowercase=params.get("lowercase", False),
                whitespace=params.get("whitespace", False), eps_smoothing=params.get("eps_smoothing", False))


def corpus_score(name: str, answers: Sequence[str], references: Sequence[Sequence[str]],
                 params: Mapping[str, Any] | None = None, *, n_resamples: int = N_RESAMPLES,
                 seed: int = SEED, level: float = 0.95) -> dict[str, Any] | None:
    """Corpus-level score (0-1) of ``name`` (bleu, bleu2, chrf) with its segment-bootstrap interval.

    Equal to ``sacrebleu.BLEU(...).corpus_score(answers, refs).score / 100`` (``CHRF`` for chrf),
    references padded with ``None`` where a segment has fewer. ``None`` without segments.
    """
    pairs = [(a, list(r)) for a, r in zip(answers, references, strict=True) if r]
    if not pairs:
        return None
    width = max(len(r) for _, r in pairs)
    hyps = [a for a, _ in pairs]
    streams = [[r[i] if i < len(r) else None for _, r in pairs] for i in range(width)]
    sc = _scorer(name, params or {})
    stats = np.asarray(sc._extract_corpus_statistics(hyps, streams), dtype=np.float64)
    score = float(sc._compute_score_from_stats(stats.sum(axis=0).tolist()).score) / 100
    out: dict[str, Any] = {"corpus_score": score, "corpus_ci_low": None, "corpus_ci_high": None,
                           "corpus_n": len(pairs)}
    n = len(pairs)
    if n >= 2:
        rng = np.random.default_rng(seed)
        counts = rng.multinomial(n, np.full(n, 1 / n), size=n_resamples).astype(np.float64)
        sums = counts @ stats
        boot = np.array([sc._compute_score_from_stats(row.tolist()).score for row in sums]) / 100
        a = (1 - level) / 2
        lo, hi = np.quantile(boot, [a, 1 - a])
        out.update(corpus_ci_low=float(lo), corpus_ci_high=float(hi))
    return out


def add_corpus_scores(summary: dict[str, dict[str, Any]], requests: Sequence[Any], samples: Sequence[Any],
                      options: Mapping[str, Any] | None = None) -> None:
    """Add the corpus score to the summary of every bleu/bleu2/chrf metric of a run (in place), with
    ``mean_kind: "sentence mean"`` beside the mean so the two are never confused."""
    from ragmeter.metrics.lexical import sample_texts

    class _Ctx:
        def __init__(self, opts: Mapping[str, Any] | None) -> None:
            self.options = dict(opts or {})

    answers, refs = sample_texts(samples, _Ctx(options))  # type: ignore[arg-type]
    for r in requests:
        name = r.spec.name
        if name not in CORPUS_METRICS or r.key not in summary:
            continue
        try:
            res = corpus_score(name, answers, refs, r.params)
        except Exception as exc:  # a corpus score must never fail a finished run
            summary[r.key]["corpus_note"] = f"corpus score unavailable: {exc}"
            continue
        if res is not None:
            summary[r.key].update(res, mean_kind="sentence mean")
