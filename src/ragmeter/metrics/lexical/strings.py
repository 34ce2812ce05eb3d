"""The string metrics (rag-experiment-accelerator's keys and SQuAD's answer metrics): one table of
batch kernels (:data:`STRING_METRICS`) and one driver that expands several references per answer
and keeps the best; each metric is also a plain function (:func:`levenshtein`, :func:`token_f1` ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, ScoreColumn
from ragmeter.metrics.lexical import string_kernels as K
from ragmeter.metrics.lexical.texts import References, _as_answer, _as_columns, _as_refs, sample_texts

normalize_answer = K.normalize_answer


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
