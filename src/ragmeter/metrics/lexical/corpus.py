"""Corpus-level BLEU and chrF of a run, with a bootstrap interval over segments.

A run's ``bleu`` / ``chrf`` is the *mean of sentence scores*; what machine-translation users call
BLEU is the corpus score: n-gram matches and lengths summed over every segment first, then one
score (``sacrebleu.BLEU().corpus_score``). The two differ (a corpus BLEU is not the average of
sentence BLEUs). Those metrics declare :func:`corpus_hook` (``MetricSpec.corpus``): it puts the
corpus score beside the sentence mean in the run summary, on the same 0-1 scale: ``corpus_score``,
``corpus_ci_low``, ``corpus_ci_high`` (percentile bootstrap over segments: resample the segments, sum their sacrebleu sufficient
statistics, recompute the score; 1000 resamples, fixed seed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.metrics.registry import WorkerCache

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
    hyps: Sequence[str] = answers
    refs: Sequence[Sequence[str]] = references
    if not all(references):  # segments without a reference are left out
        pairs = [(a, list(r)) for a, r in zip(answers, references, strict=True) if r]
        hyps, refs = [a for a, _ in pairs], [r for _, r in pairs]
    if not hyps:
        return None
    if CORPUS_METRICS[name] == "BLEU":
        stats, from_stats = _bleu_corpus_stats(hyps, refs, params or {})
    else:
        sc = _scorer(name, params or {})
        width = max(len(r) for r in refs)
        streams = [[r[i] if i < len(r) else None for r in refs] for i in range(width)]
        stats = np.asarray(sc._extract_corpus_statistics(hyps, streams), dtype=np.float64)

        def from_stats(row: Any) -> float:
            return float(sc._compute_score_from_stats(list(row)).score)
    score = from_stats(stats.sum(axis=0)) / 100
    out: dict[str, Any] = {"corpus_score": score, "corpus_ci_low": None, "corpus_ci_high": None,
                           "corpus_n": len(hyps)}
    n = len(hyps)
    if n >= 2:
        boot = np.array([from_stats(row) for row in _resampled_sums(stats, n_resamples, seed)]) / 100
        a = (1 - level) / 2
        lo, hi = np.quantile(boot, [a, 1 - a])
        out.update(corpus_ci_low=float(lo), corpus_ci_high=float(hi))
    return out


def _bleu_corpus_stats(hyps: Sequence[str], refs: Sequence[Sequence[str]], params: Mapping[str, Any]
                       ) -> tuple[np.ndarray, Any]:
    """Per-segment BLEU statistics in sacrebleu's order (hyp length, closest reference length,
    then matches and totals per order), from the same counter sentence BLEU uses (and remembers),
    and the corpus score of a row of summed statistics (``BLEU.compute_bleu``, no effective order)."""
    from ragmeter.metrics.lexical.translation import bleu_from_stats, bleu_stats

    order = params.get("max_ngram_order", 4)
    st = bleu_stats(hyps, refs, max_ngram_order=order, lowercase=params.get("lowercase", False),
                    tokenize=params.get("tokenize", "13a"))
    stats = np.column_stack([st["hyp_len"], st["ref_len"], st["correct"], st["total"]]).astype(np.float64)
    smooth, value = params.get("smooth_method", "exp"), params.get("smooth_value")

    def from_stats(row: Any) -> float:
        r = [int(x) for x in row]
        return bleu_from_stats(r[2:2 + order], r[2 + order:], r[0], r[1], smooth, value, False, order)

    return stats, from_stats


def _resampled_sums(stats: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Column sums of ``n_resamples`` bootstrap resamples of the rows of ``stats``: each resample's
    multiplicities are the counts of ``n`` uniform draws (a bincount), applied by a matrix product.
    The draws come in small blocks (no page-fault churn); the products take several blocks at once
    (a product of a few rows is slow), which leaves every sum as it was: the counts and ``stats``
    hold integers, so each sum is exact whatever the order of its additions."""
    n = len(stats)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, stats.shape[1]))
    block = max(1, min(n_resamples, (1 << 17) // n))
    group = block * max(1, (1 << 19) // (block * n))  # resamples per product: about 4 MiB of counts
    counts = np.empty((min(group, n_resamples), n))
    for g in range(0, n_resamples, group):
        rows = min(group, n_resamples - g)
        for i in range(g, g + rows, block):
            m = min(block, g + rows - i)
            # uniform draws on 0..n-1 from raw 32-bit halves (Lemire's multiply-shift), offset per resample
            raw = rng.bit_generator.random_raw((m * n + 1) // 2).view(np.uint32)[:m * n]
            draws = np.multiply(raw, np.uint64(n), dtype=np.uint64)
            np.right_shift(draws, np.uint64(32), out=draws)
            draws = draws.view(np.int64).reshape(m, n)
            draws += (np.arange(m, dtype=np.int64) * n)[:, None]
            counts[i - g:i - g + m] = np.bincount(draws.ravel(), minlength=m * n).reshape(m, n)
        np.matmul(counts[:rows], stats, out=out[g:g + rows])
    return out


#: corpus fields computed in this process or handed back by a worker process
#: (:func:`export_corpus_memo`), keyed by :func:`_memo_key`; the last few only
_CORPUS_MEMO: dict[tuple[Any, ...], dict[str, Any] | None] = {}
_CORPUS_MEMO_MAX = 8


def _memo_key(samples: Sequence[Any], options: Mapping[str, Any], params: Mapping[str, Any],
              name: str) -> tuple[Any, ...]:
    """What a corpus score depends on: the metric, its parameters, the resampling, whether texts are
    NFC-normalised, and every sample's answer and references, the texts by a BLAKE2b digest of their
    pickle (equal pickles are equal texts). The pickler runs without its memo (``fast``): the bytes
    then depend on the texts alone, not on which of them are one object, and it takes a third of the
    time (15 against 45 ms for 30,000 pairs)."""
    import hashlib
    import io
    import pickle

    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True  # texts and lists of texts: no cycle for the memo to guard against
    pickler.dump([(s.answer, s.references) for s in samples])
    return (name, repr(sorted(params.items())), options.get("unicode_normalize") is False, N_RESAMPLES, SEED,
            len(samples), hashlib.blake2b(buf.getbuffer(), digest_size=32).digest())


def corpus_fields(samples: Sequence[Any], options: Mapping[str, Any], params: Mapping[str, Any],
                  name: str) -> dict[str, Any] | None:
    """The corpus score of metric ``name`` over a run's samples (as the metric sees their texts), with
    ``mean_kind: "sentence mean"`` so the summary's mean and the corpus score are never confused.
    Remembered (a worker process that scored a whole column computes it there and hands it back:
    :mod:`ragmeter.run.engines.forked`)."""
    from ragmeter.metrics.lexical.texts import sample_texts

    key = _memo_key(samples, options, params, name)
    if key in _CORPUS_MEMO:
        got = _CORPUS_MEMO[key]
        return None if got is None else dict(got)

    class _Ctx:
        def __init__(self, opts: Mapping[str, Any]) -> None:
            self.options = dict(opts)

    answers, refs = sample_texts(samples, _Ctx(options))  # type: ignore[arg-type]
    res = corpus_score(name, answers, refs, params)
    out = None if res is None else {**res, "mean_kind": "sentence mean"}
    if len(_CORPUS_MEMO) >= _CORPUS_MEMO_MAX:
        _CORPUS_MEMO.clear()
    _CORPUS_MEMO[key] = None if out is None else dict(out)
    return out


def export_corpus_memo() -> dict[tuple[Any, ...], dict[str, Any] | None]:
    """The remembered corpus fields (a worker process hands them back with its scores)."""
    return dict(_CORPUS_MEMO)


def merge_corpus_memo(memo: Mapping[tuple[Any, ...], dict[str, Any] | None]) -> None:
    """Remember corpus fields computed elsewhere (see :func:`export_corpus_memo`)."""
    if len(_CORPUS_MEMO) + len(memo) > _CORPUS_MEMO_MAX:
        _CORPUS_MEMO.clear()
    _CORPUS_MEMO.update(memo)


def corpus_hook(name: str) -> Callable[[Sequence[Any], Mapping[str, Any], Mapping[str, Any]], dict[str, Any] | None]:
    """The ``corpus`` hook of metric ``name`` (bleu, bleu2, chrf) for its registration."""
    def hook(samples: Sequence[Any], options: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any] | None:
        return corpus_fields(samples, options, params, name)

    hook.__name__ = f"{name}_corpus"
    return hook


def _export_bleu() -> dict[str, Any]:
    """What a worker process hands back: the corpus scores it computed (it scored a metric's whole
    column: :mod:`ragmeter.run.engines.forked`), else the BLEU statistics it counted, which the
    parent's corpus score then reuses."""
    from ragmeter.metrics.lexical.translation import export_memo

    corpus = export_corpus_memo()
    return {"corpus": corpus, "stats": {} if corpus else export_memo()}


def _merge_bleu(state: dict[str, Any]) -> None:
    from ragmeter.metrics.lexical.translation import merge_memo

    merge_corpus_memo(state.get("corpus") or {})
    merge_memo(state.get("stats") or {})


#: declared on the BLEU metrics: a worker process hands its corpus scores or its counted statistics
#: back to the parent
BLEU_CACHE = WorkerCache("bleu_stats", _export_bleu, _merge_bleu)
