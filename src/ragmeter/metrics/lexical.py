"""Lexical metrics: string similarity, ROUGE, BLEU, chrF, SQuAD exact match / token F1, keywords.

Every metric key of Microsoft's rag-experiment-accelerator is registered under its name (``lcsstr``,
``levenshtein``, ``rouge1_fmeasure`` ...) with the semantics of its code (``plain_metrics.py``) on a
0-1 scale, and every metric is also a plain function::

    >>> from ragmeter.metrics import lexical
    >>> lexical.levenshtein("kitten", "sitting")
    0.5714285714285714
    >>> lexical.rouge("The cat sat.", "A cat sat down.")["rouge1"].fmeasure
    0.5714285714285715

The string metrics share one driver and a table of batch kernels (:data:`STRING_METRICS`): each
kernel scores aligned (answer, reference) pairs, the driver expands several references per answer
and keeps the best. ROUGE computes its nine keys from one tokenisation per pair and the run memoises
them, so asking for all nine costs one ROUGE computation. See ``docs/metrics/lexical.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ragmeter.core.context import ScoringContext, register_service
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, ScoreColumn
from ragmeter.metrics import _lexical_kernels as K
from ragmeter.metrics._lexical_mt import bleu_batch, check_bleu_params, check_chrf_params, chrf_batch
from ragmeter.metrics._lexical_rouge import ROUGE_KEYS, rouge_multi
from ragmeter.metrics.base import MetricSpec, register_metric

__all__ = [
    "FUZZ_SCORERS", "ROUGE_KEYS", "STRING_METRICS", "RougeScore", "StringMetric", "bleu", "bleu2", "bleu_scores", "chrf",
    "chrf_scores", "cosine", "exact_match", "fuzzy_score", "hamming", "jaccard", "jaro_winkler",
    "keyword_match", "lcsseq", "lcsstr", "levenshtein", "normalize_answer", "rouge", "rouge_scores",
    "string_similarity", "token_f1",
]

References = str | Sequence[str]
normalize_answer = K.normalize_answer


# ---- input validation (once, at the public edge) ----------------------------------------------

def _as_refs(reference: Any, where: str = "reference") -> list[str]:
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, Sequence) and not isinstance(reference, bytes):
        refs = list(reference)
        if not refs:
            raise MetricError(f"{where}: at least one reference is needed, got an empty list")
        for j, r in enumerate(refs):
            if not isinstance(r, str):
                raise MetricError(f"{where}[{j}] must be a string, got {type(r).__name__}")
        return refs
    raise MetricError(f"{where} must be a string or a list of strings, got {type(reference).__name__}")


def _as_answer(answer: Any, where: str = "answer") -> str:
    if not isinstance(answer, str):
        raise MetricError(f"{where} must be a string, got {type(answer).__name__}")
    return answer


def _as_columns(answers: Sequence[Any], references: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    if isinstance(answers, str) or isinstance(references, str):
        raise MetricError("answers and references must be lists (one entry per pair), not strings")
    if len(answers) != len(references):
        raise MetricError(f"answers and references differ in length: {len(answers)} != {len(references)}")
    return ([_as_answer(a, f"answers[{i}]") for i, a in enumerate(answers)],
            [_as_refs(r, f"references[{i}]") for i, r in enumerate(references)])


# ---- string metrics: one table of kernels, one driver -----------------------------------------

@dataclass(frozen=True)
class StringMetric:
    """A string metric: a batch kernel over aligned (answer, reference) pairs and what it means.

    Attributes:
        key: config key.
        kernel: ``kernel(answers, references, **params) -> float64 array``; NaN means "no value
            against this reference" (e.g. an empty keyword).
        summary: one paragraph with the formula (the registry description).
        reference_impl: the implementation whose values this one reproduces.
        symmetric: whether swapping answer and reference leaves the value unchanged.
        defaults: parameters and their defaults.
        undefined: the no-value reason when the kernel gives NaN for every reference.
    """

    key: str
    kernel: Callable[..., np.ndarray]
    summary: str
    reference_impl: str
    symmetric: bool = True
    defaults: tuple[tuple[str, Any], ...] = ()
    undefined: str = ""


STRING_METRICS: dict[str, StringMetric] = {m.key: m for m in (
    StringMetric(
        "lcsstr", K.lcsstr_kernel,
        "Longest common substring similarity: L / max(|a|, |b|), L the length of the longest "
        "contiguous run of characters shared by answer and reference; 1 for two empty strings.",
        "textdistance.lcsstr.normalized_similarity"),
    StringMetric(
        "lcsseq", K.lcsseq_kernel,
        "Longest common subsequence similarity: LCS(a, b) / max(|a|, |b|) over characters "
        "(not necessarily contiguous); 1 for two empty strings.",
        "rapidfuzz.distance.LCSseq.normalized_similarity"),
    StringMetric(
        "cosine", K.cosine_kernel,
        "Cosine (Ochiai) similarity of the character multisets: |A ∩ B| / sqrt(|A| |B|), counting "
        "repeated characters; 1 for identical strings, 0 when exactly one is empty.",
        "textdistance.cosine.normalized_similarity"),
    StringMetric(
        "jaro_winkler", K.jaro_winkler_kernel,
        "Jaro-Winkler similarity: Jaro similarity (matching characters within a window, "
        "transpositions) raised for a common prefix of up to 4 characters (weight 0.1).",
        "rapidfuzz.distance.JaroWinkler.normalized_similarity"),
    StringMetric(
        "hamming", K.hamming_kernel,
        "Hamming similarity: 1 - (positions that differ, the shorter string padded to the longer) "
        "/ max(|a|, |b|); 1 for two empty strings.",
        "rapidfuzz.distance.Hamming.normalized_similarity(pad=True)"),
    StringMetric(
        "jaccard", K.jaccard_kernel,
        "Jaccard similarity of the character multisets: |A ∩ B| / |A ∪ B|, counting repeated "
        "characters; 1 for identical strings, 0 when exactly one is empty.",
        "textdistance.jaccard.normalized_similarity"),
    StringMetric(
        "levenshtein", K.levenshtein_kernel,
        "Levenshtein similarity: 1 - (insertions + deletions + substitutions to turn one string "
        "into the other) / max(|a|, |b|); 1 for two empty strings.",
        "rapidfuzz.distance.Levenshtein.normalized_similarity"),
    StringMetric(
        "fuzzy_score", K.fuzzy_kernel,
        "RapidFuzz fuzzy score / 100: token_set_ratio by default (the ratio of the shared word "
        "set against each side's remaining words, best of the three comparisons); the other "
        "rapidfuzz.fuzz scorers are selectable with the 'scorer' parameter.",
        "rapidfuzz.fuzz.token_set_ratio / 100", defaults=(("scorer", "token_set_ratio"),)),
    StringMetric(
        "exact_match", K.exact_match_kernel,
        "SQuAD exact match: 1 when answer and reference are equal after SQuAD normalisation "
        "(lower case, no punctuation, no articles a/an/the, single spaces), else 0.",
        "SQuAD v2.0 evaluation script (compute_exact)"),
    StringMetric(
        "token_f1", K.token_f1_kernel,
        "SQuAD token F1: harmonic mean of token precision and recall of the normalised answer "
        "against the normalised reference (shared tokens counted with multiplicity); 1 when both "
        "are empty, 0 when one is.",
        "SQuAD v2.0 evaluation script (compute_f1)"),
    StringMetric(
        "keyword_match", K.keyword_kernel,
        "Keyword containment: 1 when the reference (the expected keyword) occurs in the answer after "
        "case folding, punctuation removal and whitespace collapsing, else 0 (binary: no 0.5 "
        "floor). 'whole_words' requires the keyword to start and end at word boundaries.",
        "the usual `expected.lower() in answer.lower()` check, without its 0.5 floor", symmetric=False,
        defaults=(("whole_words", False),), undefined="keyword is empty after normalisation"),
)}


def _check_string_params(metric: str, params: dict[str, Any]) -> None:
    allowed = dict(STRING_METRICS[metric].defaults)
    unknown = set(params) - set(allowed)
    if unknown:
        raise MetricError(f"{metric} has no parameter(s) {sorted(unknown)}; valid: {sorted(allowed)}")
    if metric == "fuzzy_score" and params.get("scorer", "token_set_ratio") not in K.FUZZ_SCORERS:
        raise MetricError(f"unknown fuzzy_score scorer {params['scorer']!r}; valid: {list(K.FUZZ_SCORERS)}")
    if metric == "keyword_match" and not isinstance(params.get("whole_words", False), bool):
        raise MetricError(f"whole_words must be true or false, got {params['whole_words']!r}")


def _best_per_group(values: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NaN-ignoring max and its first position within consecutive groups (all-NaN group: NaN, -1)."""
    if bool((sizes == 1).all()):
        return values, np.where(np.isnan(values), -1, 0)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    best = np.fmax.reduceat(values, starts)
    owner = np.repeat(np.arange(sizes.size), sizes)
    pos = np.arange(values.size) - starts[owner]
    hit = np.where(values == best[owner], pos, np.iinfo(np.int64).max)
    arg = np.minimum.reduceat(hit, starts)
    arg[np.isnan(best)] = -1
    return best, arg


def _string_best(metric: str, answers: list[str], refs: list[list[str]],
                 params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trusted inputs -> (best value per answer, index of the best reference, references per answer)."""
    sizes = np.fromiter((len(r) for r in refs), dtype=np.int64, count=len(refs))
    flat_a = [a for a, n in zip(answers, sizes, strict=True) for _ in range(n)]
    flat_r = [r for rs in refs for r in rs]
    values = STRING_METRICS[metric].kernel(flat_a, flat_r, **params)
    if values.size == 0:
        return values, np.zeros(0, dtype=np.int64), sizes
    best, arg = _best_per_group(values, sizes)
    return best, arg, sizes


def string_similarity(metric: str, answers: Sequence[str], references: Sequence[References],
                      **params: Any) -> np.ndarray:
    """Score a column of (answer, references) pairs with one string metric of :data:`STRING_METRICS`.

    Args:
        metric: ``lcsstr``, ``lcsseq``, ``cosine``, ``jaro_winkler``, ``hamming``, ``jaccard``,
            ``levenshtein``, ``fuzzy_score``, ``exact_match``, ``token_f1`` or ``keyword_match``.
        answers: one string per pair.
        references: per pair, a string or a non-empty list of strings (the best one counts).
        **params: the metric's parameters (``scorer`` for fuzzy_score, ``whole_words`` for
            keyword_match).

    Returns:
        float64 array in [0, 1]; NaN where the metric has no value (keyword_match with an empty
        keyword).

    Example:
        >>> string_similarity("levenshtein", ["abc", "abc"], ["abd", ["xyz", "abc"]]).tolist()
        [0.6666666666666667, 1.0]
    """
    if metric not in STRING_METRICS:
        raise MetricError(f"unknown string metric {metric!r}; valid: {sorted(STRING_METRICS)}")
    _check_string_params(metric, params)
    a, r = _as_columns(answers, references)
    return _string_best(metric, a, r, params)[0]


def _one(metric: str, answer: Any, reference: Any, **params: Any) -> float:
    _check_string_params(metric, params)
    value = _string_best(metric, [_as_answer(answer)], [_as_refs(reference)], params)[0][0]
    return float(value)


def lcsstr(answer: str, reference: References) -> float:
    """Longest common substring similarity (rag-experiment-accelerator ``lcsstr``).

    ``L / max(len(answer), len(reference))`` with ``L`` the length of the longest run of characters
    that occurs in both strings; textdistance's ``lcsstr.normalized_similarity``. Range [0, 1];
    1 for two empty strings, 0 when only one is empty. With several references the best counts.

    Example:
        >>> lcsstr("the cat sat", "a cat sat down")
        0.5714285714285714
    """
    return _one("lcsstr", answer, reference)


def lcsseq(answer: str, reference: References) -> float:
    """Longest common subsequence similarity (rag-experiment-accelerator ``lcsseq``).

    ``LCS(answer, reference) / max(len(answer), len(reference))`` over characters, the shared
    characters in order but not necessarily contiguous; rapidfuzz ``LCSseq.normalized_similarity``.
    Range [0, 1]; 1 for two empty strings.

    Example:
        >>> lcsseq("abcde", "ace")
        0.6
    """
    return _one("lcsseq", answer, reference)


def cosine(answer: str, reference: References) -> float:
    """Cosine (Ochiai) similarity of character multisets (rag-experiment-accelerator ``cosine``).

    ``|A ∩ B| / sqrt(|A| * |B|)`` where ``A`` and ``B`` are the multisets of characters of the two
    strings (textdistance's ``cosine`` with its default ``qval=1``). Range [0, 1]; 1 for identical
    strings (two empty strings included), 0 when exactly one is empty. Word order is ignored.

    Example:
        >>> cosine("aab", "abb")
        0.6666666666666666
    """
    return _one("cosine", answer, reference)


def jaro_winkler(answer: str, reference: References) -> float:
    """Jaro-Winkler similarity (rag-experiment-accelerator ``jaro_winkler``).

    Jaro similarity ``(m/|a| + m/|b| + (m - t)/m) / 3`` (``m`` matching characters within
    ``max(|a|, |b|)/2 - 1`` positions, ``t`` half the transpositions), plus ``l * 0.1 * (1 - jaro)``
    for a common prefix of ``l <= 4`` characters when jaro > 0.7; rapidfuzz
    ``JaroWinkler.normalized_similarity``. Range [0, 1]; 1 for two empty strings.

    Example:
        >>> round(jaro_winkler("martha", "marhta"), 4)
        0.9611
    """
    return _one("jaro_winkler", answer, reference)


def hamming(answer: str, reference: References) -> float:
    """Hamming similarity with padding (rag-experiment-accelerator ``hamming``).

    ``1 - d / max(|a|, |b|)`` where ``d`` counts the positions at which the strings differ, the
    shorter one padded to the length of the longer (each padded position differs); rapidfuzz
    ``Hamming.normalized_similarity(pad=True)``. Range [0, 1]; 1 for two empty strings.

    Example:
        >>> hamming("karolin", "kathrin")
        0.5714285714285714
    """
    return _one("hamming", answer, reference)


def jaccard(answer: str, reference: References) -> float:
    """Jaccard similarity of character multisets (rag-experiment-accelerator ``jaccard``).

    ``|A ∩ B| / |A ∪ B|`` with ``A``, ``B`` the multisets of characters (textdistance's ``jaccard``,
    ``qval=1``: intersection takes the smaller count of each character, union the larger). Range
    [0, 1]; 1 for identical strings, 0 when exactly one is empty.

    Example:
        >>> jaccard("aab", "abb")
        0.5
    """
    return _one("jaccard", answer, reference)


def levenshtein(answer: str, reference: References) -> float:
    """Levenshtein similarity (rag-experiment-accelerator ``levenshtein``).

    ``1 - d / max(|a|, |b|)`` with ``d`` the minimum number of single-character insertions,
    deletions and substitutions turning one string into the other; rapidfuzz
    ``Levenshtein.normalized_similarity``. Range [0, 1]; 1 for two empty strings.

    Example:
        >>> levenshtein("kitten", "sitting")
        0.5714285714285714
    """
    return _one("levenshtein", answer, reference)


def fuzzy_score(answer: str, reference: References, scorer: str = "token_set_ratio") -> float:
    """RapidFuzz fuzzy score on a 0-1 scale (rag-experiment-accelerator ``fuzzy_score``).

    ``rapidfuzz.fuzz.<scorer>(answer, reference) / 100``. The default ``token_set_ratio`` splits
    both strings into word sets and takes the best indel ratio among (shared words) vs (shared +
    each side's remaining words), so word order and repeated words do not matter and a string whose
    words are a subset of the other's scores 1. ``scorer`` is any of :data:`FUZZ_SCORERS`.

    Example:
        >>> fuzzy_score("new york mets", "the new york mets")
        1.0
    """
    return _one("fuzzy_score", answer, reference, scorer=scorer)


FUZZ_SCORERS = K.FUZZ_SCORERS


def exact_match(answer: str, reference: References) -> float:
    """SQuAD exact match.

    1.0 when ``normalize_answer(answer) == normalize_answer(reference)`` (lower case, ASCII
    punctuation removed, articles a/an/the removed, whitespace collapsed), else 0.0; with several
    references, 1.0 when any matches.

    Example:
        >>> exact_match("The Eiffel Tower!", "eiffel tower")
        1.0
    """
    return _one("exact_match", answer, reference)


def token_f1(answer: str, reference: References) -> float:
    """SQuAD token F1.

    ``2 P R / (P + R)`` with ``P = shared / |answer tokens|`` and ``R = shared / |reference tokens|``
    over the whitespace tokens of the normalised strings, shared tokens counted with multiplicity
    (SQuAD v2.0 ``compute_f1``). Range [0, 1]; 1 when both normalise to nothing, 0 when one does.
    With several references the best counts.

    Example:
        >>> token_f1("the cat sat on the mat", "a cat sat")
        0.6666666666666666
    """
    return _one("token_f1", answer, reference)


def keyword_match(answer: str, keyword: References, whole_words: bool = False) -> float | None:
    """Binary keyword containment (the common keyword check, without its 0.5 floor).

    1.0 when the normalised keyword (case-folded, punctuation and symbols turned into spaces,
    whitespace collapsed) occurs in the normalised answer, else 0.0. With ``whole_words`` it must
    also start and end at word boundaries ("paris" is not found in "comparison"). With several
    keywords, 1.0 when any is found. Returns ``None`` when every keyword is empty after
    normalisation: there is nothing to look for, which is not a wrong answer.

    Example:
        >>> keyword_match("The capital of France is Paris.", "paris")
        1.0
        >>> keyword_match("The capital of France is Lyon.", "Paris")
        0.0
    """
    value = _one("keyword_match", answer, keyword, whole_words=whole_words)
    return None if np.isnan(value) else value


def sample_texts(samples: Sequence[Sample], ctx: ScoringContext | None) -> tuple[list[str], list[list[str]]]:
    """Answers and references of ``samples`` as the lexical metrics see them: Unicode NFC-normalised
    ("café" typed with a combining accent equals the precomposed "café"), unless the run option
    ``unicode_normalize`` is false. A missing answer is the empty string."""
    answers = [s.answer or "" for s in samples]
    refs = [list(s.references) for s in samples]
    if ctx is not None and ctx.options.get("unicode_normalize") is False:
        return answers, refs
    import unicodedata

    # most text is already NFC: one check over the whole column, per-text work only otherwise
    if unicodedata.is_normalized("NFC", "\n".join([*answers, *(r for rs in refs for r in rs)])):
        return answers, refs

    def nfc(t: str) -> str:
        return t if t.isascii() else unicodedata.normalize("NFC", t)

    return [nfc(a) for a in answers], [[nfc(r) for r in rs] for rs in refs]


def _unicode_token_value(metric: str, answer: str, reference: str) -> float:
    """exact_match / token_f1 on :func:`ragmeter.core.language.words` tokens (any script, CJK by character,
    case-folded, punctuation dropped; no English article removal). Both empty -> 1, one empty -> 0,
    as SQuAD."""
    from collections import Counter

    from ragmeter.core.language import words

    a, r = words(answer), words(reference)
    if metric == "exact_match":
        return float(a == r)
    if not a or not r:
        return float(a == r)
    common = sum((Counter(a) & Counter(r)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(a), common / len(r)
    return 2 * prec * rec / (prec + rec)


def _string_scores(metric: str, samples: Sequence[Sample], params: dict[str, Any],
                   ctx: ScoringContext | None = None) -> ScoreColumn:
    spec = STRING_METRICS[metric]
    answers, refs = sample_texts(samples, ctx)
    best, arg, sizes = _string_best(metric, answers, refs, params)
    if metric in ("exact_match", "token_f1"):
        # other languages: Unicode word tokens instead of SQuAD's English normalisation
        import ragmeter.core.language as lang

        options = ctx.options if ctx is not None else None
        for i, code in enumerate(lang.of_many(samples, options)):
            if code != "en" and refs[i]:
                vals = [_unicode_token_value(metric, answers[i], r) for r in refs[i]]
                best[i] = max(vals)
                arg[i] = vals.index(best[i])
    missing = np.isnan(best)
    reasons = None
    if missing.any():  # NaN: no reference gave a value
        why = spec.undefined or f"{metric} has no value for this pair"
        reasons = [why if m else None for m in missing.tolist()]
    details = None
    if (sizes > 1).any():
        details = [{"best_reference": j} if n > 1 and not m else None
                   for j, n, m in zip(arg.tolist(), sizes.tolist(), missing.tolist(), strict=True)]
    return ScoreColumn(best, reasons, details)


def _string_batch_fn(metric: str) -> Callable[..., ScoreColumn]:
    def fn(samples: Sequence[Sample], ctx: ScoringContext | None = None, **params: Any) -> ScoreColumn:
        _check_string_params(metric, params)
        return _string_scores(metric, samples, params, ctx)

    fn.__name__ = f"{metric}_batch"
    fn.__doc__ = STRING_METRICS[metric].summary
    return fn


def _string_check(metric: str) -> Callable[..., str | None]:
    def check(ctx: ScoringContext | None = None, **params: Any) -> str | None:
        try:
            _check_string_params(metric, params)
        except MetricError as exc:
            return str(exc)
        return None

    return check


# ---- ROUGE ------------------------------------------------------------------------------------

class RougeScore(NamedTuple):
    """Precision, recall and F-measure of one ROUGE type (as ``rouge_score.scoring.Score``)."""

    precision: float
    recall: float
    fmeasure: float


def rouge_scores(answers: Sequence[str], references: Sequence[References], *,
                 use_stemmer: bool = True) -> dict[str, np.ndarray]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of a column of (answer, references) pairs.

    Values equal ``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"],
    use_stemmer=use_stemmer).score_multi(references, answer)``: for ROUGE-N, precision =
    overlap / (answer n-grams), recall = overlap / (reference n-grams), overlap counting each n-gram
    at most as often as it occurs on both sides; for ROUGE-L the same with the longest common token
    subsequence; F = 2PR / (P + R). Tokens: lower-case ``[a-z0-9]+`` runs, Porter-stemmed when
    longer than 3 characters if ``use_stemmer``. With several references, per ROUGE type the
    reference with the highest F-measure gives all three values.

    Returns:
        ``{"rouge1_precision": array, ..., "rougeL_fmeasure": array}`` (nine float64 arrays).

    Example:
        >>> rouge_scores(["the cats sat"], ["a cat sat"])["rouge1_recall"].tolist()
        [0.6666666666666666]
    """
    if not isinstance(use_stemmer, bool):
        raise MetricError(f"use_stemmer must be true or false, got {use_stemmer!r}")
    a, r = _as_columns(answers, references)
    values, _ = rouge_multi(a, r, use_stemmer)
    return {k: values[:, i] for i, k in enumerate(ROUGE_KEYS)}


def rouge(answer: str, reference: References, *, use_stemmer: bool = True) -> dict[str, RougeScore]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of one answer (rag-experiment-accelerator ``rouge{1,2,L}_{precision,recall,fmeasure}``).

    Same values as ``rouge_score.rouge_scorer.RougeScorer([...], use_stemmer=True).score(reference,
    answer)`` (``score_multi`` with several references); see :func:`rouge_scores`. Precision is
    relative to the answer and recall to the reference (rag-experiment-accelerator's prose has them swapped).
    Range [0, 1]; every value is 0 when either side has no token.

    Example:
        >>> s = rouge("The cat sat.", "A cat sat down.")
        >>> s["rouge1"]
        RougeScore(precision=0.6666666666666666, recall=0.5, fmeasure=0.5714285714285715)
    """
    cols = rouge_scores([_as_answer(answer)], [_as_refs(reference)], use_stemmer=use_stemmer)
    return {t: RougeScore(*(float(cols[f"{t}_{m}"][0]) for m in ("precision", "recall", "fmeasure")))
            for t in ("rouge1", "rouge2", "rougeL")}


class _LexicalMemo:
    """Per-run memo of ROUGE rows, so the nine ROUGE keys of a sample are computed once."""

    def __init__(self) -> None:
        self.rouge: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}

    def stats(self) -> dict[str, int]:
        return {"rouge_pairs": len(self.rouge)}

    def close(self) -> None:
        self.rouge.clear()


register_service("lexical_memo", lambda ctx: _LexicalMemo())


def _rouge_rows(samples: Sequence[Sample], ctx: ScoringContext | None, use_stemmer: bool,
                bigrams: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """ROUGE rows of the samples, remembered for the run's other ROUGE keys; ``bigrams=False``
    (a rouge1/rougeL key) skips ROUGE-2's counting, which a rouge2 key then adds."""
    import ragmeter.core.language as lang

    memo = ctx.service("lexical_memo").rouge if ctx is not None else {}
    options = ctx.options if ctx is not None else None
    answers, refs = sample_texts(samples, ctx)
    keys = [(use_stemmer, a, tuple(r), code)
            for a, r, code in zip(answers, refs, lang.of_many(samples, options), strict=True)]
    todo = [k for k in dict.fromkeys(keys) if k not in memo or (bigrams and np.isnan(memo[k][0][3]))]
    for code in dict.fromkeys(k[3] for k in todo):
        group = [k for k in todo if k[3] == code]
        values, best = rouge_multi([k[1] for k in group], [k[2] for k in group], use_stemmer, code, bigrams)
        for k, v, b in zip(group, values, best, strict=True):
            memo[k] = (v, b)
    return [memo[k] for k in keys]


def _rouge_batch_fn(key: str) -> Callable[..., ScoreColumn]:
    col = ROUGE_KEYS.index(key)

    def fn(samples: Sequence[Sample], ctx: ScoringContext | None = None, *,
           use_stemmer: bool = True) -> ScoreColumn:
        if not isinstance(use_stemmer, bool):
            raise MetricError(f"use_stemmer must be true or false, got {use_stemmer!r}")
        rows = _rouge_rows(samples, ctx, use_stemmer, bigrams=key.startswith("rouge2"))
        values = np.fromiter((v[col] for v, _ in rows), dtype=np.float64, count=len(rows))
        details = None
        if any(len(s.references) > 1 for s in samples):
            details = [{"best_reference": int(b[col // 3])} if len(s.references) > 1 else None
                       for s, (_, b) in zip(samples, rows, strict=True)]
        return ScoreColumn(values, None, details)

    fn.__name__ = f"{key}_batch"
    return fn


def _rouge_check(ctx: ScoringContext | None = None, **params: Any) -> str | None:
    if not isinstance(params.get("use_stemmer", True), bool):
        return f"use_stemmer must be true or false, got {params['use_stemmer']!r}"
    return None


# ---- BLEU and chrF (sacrebleu) ----------------------------------------------------------------

_BLEU_DEFAULTS: dict[str, Any] = {"max_ngram_order": 4, "smooth_method": "exp", "smooth_value": None,
                                  "lowercase": False, "tokenize": "13a", "effective_order": True}
# rag-experiment-accelerator (plain_metrics.bleu): HF evaluate's BLEU with max_order=2 and no smoothing
_BLEU2_DEFAULTS: dict[str, Any] = {**_BLEU_DEFAULTS, "max_ngram_order": 2, "smooth_method": "none",
                                   "effective_order": False}
_CHRF_DEFAULTS: dict[str, Any] = {"char_order": 6, "word_order": 0, "beta": 2, "lowercase": False,
                                  "whitespace": False, "eps_smoothing": False}


def _unit(values: np.ndarray) -> np.ndarray:
    # sacrebleu's 0-100 scale to 0-1; BLEU of a perfect match is 100.00000000000004 in floating point
    return np.clip(values / 100.0, 0.0, 1.0)


def bleu_scores(answers: Sequence[str], references: Sequence[References], **params: Any) -> np.ndarray:
    """Sentence BLEU of a column of (answer, references) pairs, on a 0-1 scale.

    Equal to ``sacrebleu.sentence_bleu(answer, references).score / 100`` (defaults: 4-grams,
    ``exp`` smoothing, ``13a`` tokenizer, effective order), with sacrebleu's native handling of
    several references. Parameters: ``max_ngram_order``, ``smooth_method`` (none, floor, add-k,
    exp), ``smooth_value``, ``lowercase``, ``tokenize``, ``effective_order``.
    """
    opts = _merge("bleu", _BLEU_DEFAULTS, params)
    a, r = _as_columns(answers, references)
    return _unit(bleu_batch(a, r, **opts))


def chrf_scores(answers: Sequence[str], references: Sequence[References], **params: Any) -> np.ndarray:
    """Sentence chrF of a column of (answer, references) pairs, on a 0-1 scale.

    Equal to ``sacrebleu.sentence_chrf(answer, references).score / 100`` (defaults: character
    6-grams, beta 2, whitespace ignored); ``word_order=2`` gives chrF++. With several references
    the one with the best F-score counts (sacrebleu).
    """
    opts = _merge("chrf", _CHRF_DEFAULTS, params)
    a, r = _as_columns(answers, references)
    return _unit(chrf_batch(a, r, **opts))


def _merge(name: str, defaults: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - set(defaults)
    if unknown:
        raise MetricError(f"{name} has no parameter(s) {sorted(unknown)}; valid: {sorted(defaults)}")
    return {**defaults, **params}


def bleu(answer: str, reference: References, **params: Any) -> float:
    """Sentence BLEU on a 0-1 scale (sacrebleu).

    ``BP * exp(mean_n log p_n)``, ``p_n`` the clipped n-gram precision for n = 1..4 (``exp``
    smoothing of zero counts, effective order), ``BP = exp(1 - r/c)`` when the answer (``c``
    tokens) is shorter than the closest reference (``r`` tokens), else 1; ``13a`` tokenization.
    Equal to ``sacrebleu.sentence_bleu(answer, refs).score / 100``. Range [0, 1]; 0 for an empty
    answer or reference. Parameters as :func:`bleu_scores`.

    Example:
        >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.5373
    """
    return float(bleu_scores([_as_answer(answer)], [_as_refs(reference)], **params)[0])


def bleu2(answer: str, reference: References, **params: Any) -> float:
    """BLEU up to bigrams without smoothing: rag-experiment-accelerator's ``bleu`` on a 0-1 scale.

    rag-experiment-accelerator computes BLEU with Hugging Face ``evaluate``'s ``bleu`` and ``max_order=2`` (no
    smoothing, 13a tokens). This is sacrebleu's BLEU with ``max_ngram_order=2``,
    ``smooth_method="none"`` and ``effective_order=False``, which gives the same value for one
    reference (with several, sacrebleu's brevity penalty uses the closest reference length where
    ``evaluate`` uses the shortest). 0 when no bigram matches. Range [0, 1].

    Example:
        >>> round(bleu2("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.7071
    """
    return float(bleu_scores([_as_answer(answer)], [_as_refs(reference)], **{**_BLEU2_DEFAULTS, **params})[0])


def chrf(answer: str, reference: References, **params: Any) -> float:
    """Sentence chrF on a 0-1 scale (sacrebleu).

    The F-beta score (beta = 2: recall weighs more) of character n-gram precision and recall,
    averaged over n = 1..6 (whitespace ignored); ``word_order=2`` adds word uni- and bigrams
    (chrF++). Equal to ``sacrebleu.sentence_chrf(answer, refs).score / 100``. Range [0, 1].

    Example:
        >>> round(chrf("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.7208
    """
    return float(chrf_scores([_as_answer(answer)], [_as_refs(reference)], **params)[0])


def _mt_batch_fn(name: str, batch: Callable[..., np.ndarray]) -> Callable[..., ScoreColumn]:
    def fn(samples: Sequence[Sample], ctx: ScoringContext | None = None, **params: Any) -> ScoreColumn:
        return ScoreColumn(_unit(batch(*sample_texts(samples, ctx), **params)))

    fn.__name__ = f"{name}_batch"
    return fn


def _mt_check(checker: Callable[..., None], names: Sequence[str]) -> Callable[..., str | None]:
    def check(ctx: ScoringContext | None = None, **params: Any) -> str | None:
        try:
            checker(*(params[n] for n in names))
        except MetricError as exc:
            return str(exc)
        return None

    return check


# ---- registry ---------------------------------------------------------------------------------

_REQUIRES = ("answer", "reference")

for _m in STRING_METRICS.values():
    register_metric(MetricSpec(
        name=_m.key, family="lexical", fn=_string_batch_fn(_m.key), requires=_REQUIRES,
        defaults=dict(_m.defaults), check=_string_check(_m.key), batch_size=5000,
        param="scorer" if _m.key == "fuzzy_score" else None,
        description=f"{_m.summary}\n\nReference: {_m.reference_impl}."))

for _key in ROUGE_KEYS:
    _type, _measure = _key.split("_")
    register_metric(MetricSpec(
        name=_key, family="lexical", fn=_rouge_batch_fn(_key), requires=_REQUIRES,
        defaults={"use_stemmer": True}, check=_rouge_check, batch_size=5000,
        description=(
            f"{_type.upper().replace('ROUGE', 'ROUGE-')} {_measure}: "
            + {"rouge1": "unigram", "rouge2": "bigram", "rougeL": "longest-common-subsequence"}[_type]
            + {"precision": " overlap / tokens of the answer",
               "recall": " overlap / tokens of the reference",
               "fmeasure": " F1 of precision and recall"}[_measure]
            + " (rouge-score, Porter stemming on; the best reference by F-measure)."
            "\n\nReference: rouge_score.rouge_scorer.RougeScorer(use_stemmer=True).score_multi.")))

register_metric(MetricSpec(
    name="bleu", family="lexical", fn=_mt_batch_fn("bleu", bleu_batch), requires=_REQUIRES,
    defaults=dict(_BLEU_DEFAULTS),
    check=_mt_check(check_bleu_params, ("max_ngram_order", "smooth_method", "tokenize")),
    description="Sentence BLEU / 100 (sacrebleu: 4-grams, exp smoothing, 13a tokens, effective "
                "order, several references natively).\n\nReference: sacrebleu.sentence_bleu."))
register_metric(MetricSpec(
    name="bleu2", family="lexical", fn=_mt_batch_fn("bleu2", bleu_batch), requires=_REQUIRES,
    defaults=dict(_BLEU2_DEFAULTS),
    check=_mt_check(check_bleu_params, ("max_ngram_order", "smooth_method", "tokenize")),
    description="BLEU up to bigrams, no smoothing / 100: rag-experiment-accelerator's BLEU (HF evaluate, "
                "max_order=2).\n\nReference: sacrebleu.BLEU(max_ngram_order=2, "
                "smooth_method='none').sentence_score."))
register_metric(MetricSpec(
    name="chrf", family="lexical", fn=_mt_batch_fn("chrf", chrf_batch), requires=_REQUIRES,
    defaults=dict(_CHRF_DEFAULTS),
    check=_mt_check(check_chrf_params, ("char_order", "word_order", "beta")),
    description="Sentence chrF / 100: F-beta (beta 2) of character 1..6-gram precision and recall "
                "(word_order=2: chrF++).\n\nReference: sacrebleu.sentence_chrf."))
