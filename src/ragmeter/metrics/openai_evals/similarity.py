"""The ``evaluation_metric`` kernels of OpenAI's ``text_similarity`` grader.

OpenAI documents the metrics only by name ("fuzzy string match, using rapidfuzz", "BLEU score",
"google BLEU", "METEOR", "ROUGE as defined by the rouge python library", "cosine") and has not
published its code, so each is mapped to one named reference implementation with its defaults
(docs/openai-evals.md has the table); every value is in [0, 1] except ``cosine`` ([-1, 1]):

- ``fuzzy_match``: ``rapidfuzz.fuzz.WRatio(input, reference, processor=rapidfuzz.utils.default_process) / 100``
  (the scorer of the Python-grader example in OpenAI's graders guide);
- ``bleu``: ``sacrebleu.sentence_bleu(input, [reference]).score / 100`` (4-grams, ``exp`` smoothing,
  ``13a`` tokens, effective order), computed by ragmeter's sacrebleu-exact BLEU;
- ``gleu``: ``nltk.translate.gleu_score.sentence_gleu([ref_tokens], input_tokens)`` (1- to 4-grams),
  tokens from sacrebleu's ``13a`` tokenizer, as Hugging Face ``evaluate``'s ``google_bleu``;
- ``meteor``: ``nltk.translate.meteor_score.meteor_score([ref_tokens], input_tokens)`` (alpha 0.9,
  beta 3, gamma 0.5, lower-cased, Porter stems, WordNet synonyms), ``13a`` tokens; it needs nltk's
  WordNet data (``python -m nltk.downloader wordnet``);
- ``rouge_1`` ... ``rouge_5``, ``rouge_l``: the F-measure of ``rouge_score.rouge_scorer.RougeScorer(
  ["rouge1"], use_stemmer=False)`` (and rouge2 ... rouge5, rougeL), with rouge-score's tokenizer
  (lower case, runs of ``[a-z0-9]``), reproduced by ragmeter's ROUGE tokenizer;
- ``cosine``: the cosine of the two texts' embeddings from ragmeter's embedding model
  (``--option embedding_model=...``; default all-MiniLM-L6-v2, offline). OpenAI used
  text-embedding-3-large, so values differ from OpenAI's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

ROUGE_N = {f"rouge_{n}": n for n in range(1, 6)}


def fuzzy_match(inputs: Sequence[str], refs: Sequence[str]) -> list[float]:
    from rapidfuzz import fuzz, utils

    return [fuzz.WRatio(a, b, processor=utils.default_process) / 100.0 for a, b in zip(inputs, refs, strict=True)]


def bleu(inputs: Sequence[str], refs: Sequence[str]) -> list[float]:
    from ragmeter.metrics.lexical import bleu_scores

    if not inputs:
        return []
    return [float(v) for v in bleu_scores(list(inputs), [[r] for r in refs])]


def tokens_13a(text: str) -> list[str]:
    """sacrebleu's ``13a`` tokens of ``text``."""
    from ragmeter.metrics.lexical.translation import tokenize_13a

    return tokenize_13a(text).split()


def gleu(inputs: Sequence[str], refs: Sequence[str]) -> list[float]:
    from nltk.translate.gleu_score import sentence_gleu

    return [float(sentence_gleu([tokens_13a(b)], tokens_13a(a))) for a, b in zip(inputs, refs, strict=True)]


def wordnet_problem() -> str | None:
    """Why METEOR cannot run here (nltk's WordNet data is missing), or ``None``."""
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
    except LookupError:
        return ("evaluation_metric meteor uses nltk's METEOR, whose synonym stage reads nltk's WordNet "
                "data, which is not installed: python -m nltk.downloader wordnet")
    except Exception as exc:  # noqa: BLE001 - a broken nltk data directory: say what it was
        return f"nltk's WordNet data cannot be read ({type(exc).__name__}: {exc})"
    return None


def meteor(inputs: Sequence[str], refs: Sequence[str], wordnet: Any = None) -> list[float]:
    """nltk's METEOR; ``wordnet``: a WordNet reader (default nltk's ``wordnet`` corpus)."""
    from nltk.translate.meteor_score import meteor_score

    kw = {"wordnet": wordnet} if wordnet is not None else {}
    return [float(meteor_score([tokens_13a(b)], tokens_13a(a), **kw)) for a, b in zip(inputs, refs, strict=True)]


def _rouge_ids(texts: Sequence[str]) -> list[list[int]]:
    from ragmeter.metrics.lexical.rouge_metrics import tokenizer

    # one tokenizer for the whole batch (a new one replaces it once its caches are large)
    return tokenizer(False).ids_many(list(texts))


def _f(overlap: int, n_pred: int, n_ref: int) -> float:
    # rouge_score.scoring.fmeasure of _score_ngrams' precision and recall
    p = overlap / max(n_pred, 1)
    r = overlap / max(n_ref, 1)
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def rouge_n(inputs: Sequence[str], refs: Sequence[str], n: int) -> list[float]:
    """ROUGE-N F-measure (rouge-score, no stemming): clipped n-gram overlap over each side's count."""
    ids = _rouge_ids([*inputs, *refs])
    out = []
    for a, b in zip(ids[:len(inputs)], ids[len(inputs):], strict=True):
        ga = Counter(tuple(a[i:i + n]) for i in range(len(a) - n + 1))
        gb = Counter(tuple(b[i:i + n]) for i in range(len(b) - n + 1))
        overlap = sum(min(c, gb[g]) for g, c in ga.items() if g in gb)
        out.append(_f(overlap, sum(ga.values()), sum(gb.values())))
    return out


def rouge_l(inputs: Sequence[str], refs: Sequence[str]) -> list[float]:
    """ROUGE-L F-measure (rouge-score, no stemming): longest common subsequence of the tokens; 0
    when either side has no token."""
    from rapidfuzz.distance import LCSseq

    ids = _rouge_ids([*inputs, *refs])
    out = []
    for a, b in zip(ids[:len(inputs)], ids[len(inputs):], strict=True):
        if not a or not b:
            out.append(0.0)
            continue
        lcs = LCSseq.similarity(a, b)
        p, r = lcs / len(a), lcs / len(b)
        out.append(2 * p * r / (p + r) if p + r > 0 else 0.0)
    return out


def cosine(inputs: Sequence[str], refs: Sequence[str], ctx: Any) -> list[float]:
    """Cosine of the embeddings of each pair (the run's embedding model); a blank text has a zero
    vector, so its cosine is 0."""
    if not inputs:
        return []
    svc = ctx.service("embeddings")
    a = svc.matrix(list(inputs))
    b = svc.matrix(list(refs))
    return [float(v) for v in np.clip(np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64)), -1.0, 1.0)]


def similarity(metric: str, inputs: Sequence[str], refs: Sequence[str], ctx: Any = None) -> list[float]:
    """The values of ``evaluation_metric`` ``metric`` for aligned (input, reference) pairs."""
    if metric in ROUGE_N:
        return rouge_n(inputs, refs, ROUGE_N[metric])
    if metric == "rouge_l":
        return rouge_l(inputs, refs)
    if metric == "cosine":
        return cosine(inputs, refs, ctx)
    return {"fuzzy_match": fuzzy_match, "bleu": bleu, "gleu": gleu, "meteor": meteor}[metric](inputs, refs)
