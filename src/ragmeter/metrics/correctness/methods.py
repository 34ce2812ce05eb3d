"""The correctness methods (keyword, semantic, judge) as plain functions on texts (``keyword_correct``,
``semantic_fixed``, ``semantic_guarded``) and the batch kernels the registered metrics share.

Each gives a per-sample correctness in [0, 1]. The semantic ones embed with all-MiniLM-L6-v2 by
default (the bundled, offline model) and compare the answer to every reference, keeping the best.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.core.text import (
    contains_phrase,
    fact_keys,
    fact_present,
    has_negation,
    has_strong_negation,
    is_abstention,
    key_facts,
    negation_mismatch,
    yes_no,
)

#: the methods, from the simplest to the costliest (semantic_guarded is ragmeter's own)
METHODS = ("keyword", "semantic_fixed", "semantic_dynamic", "semantic_guarded", "llm_judge", "hybrid")
DEFAULT_THRESHOLD = 0.75

Encode = Callable[[Sequence[str]], np.ndarray]


def metric_for_method(method: str) -> str:
    """The metric key of a correctness method: ``keyword`` -> ``correct_keyword``.

    Raises:
        MetricError: an unknown method (listing the valid ones).
    """
    m = method.strip().lower().replace("-", "_")
    if m.startswith("correct_"):
        m = m[len("correct_"):]
    if m not in METHODS:
        raise MetricError(f"unknown correctness method {method!r}; choose one of {', '.join(METHODS)}")
    return f"correct_{m}"


# ---- keyword -------------------------------------------------------------------------------------

def keyword_correct(answer: str, keywords: str | Sequence[str], *, mode: str = "any",
                    check_negation: bool = True, language: str = "en") -> float:
    """Binary keyword correctness: 1.0 when an expected keyword occurs in the answer, else 0.0.

    Matching is case-insensitive and ignores accents, punctuation and whitespace differences, on
    whole tokens (``"paris"`` matches "Paris." but not "Parisian"). ``mode="all"`` needs every
    keyword. There is no 0.5 floor (a known flaw of the common keyword check): a wrong answer or "I don't know" is 0. With
    ``check_negation`` an answer that negates a statement ("... is not Lisbon"; "não é Lisboa" with
    ``language="pt"``) while no keyword does is 0: the keyword is there, but denied.

    Raises:
        MetricError: no usable keyword (empty, or only punctuation), or an unknown ``mode``.

    Example:
        >>> keyword_correct("The capital of France is Lyon", "Paris")
        0.0
    """
    kws = [keywords] if isinstance(keywords, str) else list(keywords)
    kws = [k for k in kws if isinstance(k, str) and any(ch.isalnum() for ch in k)]
    if not kws:
        raise MetricError("keyword correctness needs at least one non-empty expected keyword")
    if mode not in ("any", "all"):
        raise MetricError(f"mode must be 'any' or 'all', got {mode!r}")
    hits = [contains_phrase(answer, k) for k in kws]
    ok = any(hits) if mode == "any" else all(hits)
    if ok and check_negation and has_strong_negation(answer, language) and not any(
            has_negation(k, language) for k in kws):
        return 0.0
    return 1.0 if ok else 0.0


# ---- similarity ----------------------------------------------------------------------------------

def default_encode(model: str | None = None) -> Encode:
    """An ``encode(texts)`` callable on :func:`ragmeter.embed.get_encoder` (unit-norm rows)."""
    from ragmeter.embed import get_encoder

    enc = get_encoder(model)
    return lambda texts: enc.encode(list(texts))


def reference_similarities(answers: Sequence[str], references: Sequence[Sequence[str]],
                           encode: Encode) -> list[np.ndarray]:
    """Cosine similarity of each answer to each of its references (rows are unit vectors, so the
    cosine is a dot product). Every distinct text is embedded once."""
    if len(answers) != len(references):
        raise MetricError("answers and references differ in length")
    texts = list(dict.fromkeys([*answers, *(r for refs in references for r in refs)]))
    if not texts:
        return []
    mat = np.asarray(encode(texts), dtype=np.float32)
    row = {t: i for i, t in enumerate(texts)}
    out = []
    for a, refs in zip(answers, references, strict=True):
        va = mat[row[a]]
        out.append(np.array([float(np.clip(va @ mat[row[r]], -1.0, 1.0)) for r in refs]))
    return out


def semantic_fixed(answer: str, reference: str | Sequence[str], *, threshold: float = DEFAULT_THRESHOLD,
                   model: str | None = None, encode: Encode | None = None) -> float:
    """Fixed-threshold semantic correctness: 1.0 when ``cosine(answer, reference) >= threshold`` (best reference), else 0.0.

    Known failure (all-MiniLM-L6-v2): "The capital of France is London" vs "The capital of France
    is Paris" has cosine 0.84 and passes at 0.75; "Paris is the capital of France." vs "Paris" is
    0.73 and fails. :func:`semantic_guarded` fixes both.

    Example:
        >>> semantic_fixed("Paris is France's capital city", "The capital of France is Paris")  # doctest: +SKIP
        1.0
    """
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise MetricError("semantic correctness needs at least one reference")
    sims = reference_similarities([answer], [refs], encode or default_encode(model))[0]
    return 1.0 if float(sims.max()) >= threshold else 0.0


# ---- guarded -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GuardParams:
    """Parameters of :func:`guarded_decision` (see there)."""

    min_similarity: float = 0.5
    fallback_threshold: float = DEFAULT_THRESHOLD
    min_coverage: float = 0.5
    check_negation: bool = True
    fuzzy: float = 88.0


def guarded_decision(answer: str, reference: str, similarity: float, *, question: str | None = None,
                     params: GuardParams = GuardParams(), language: str = "en") -> tuple[float, dict[str, Any]]:
    """The semantic_guarded verdict for one (answer, reference) pair with a known cosine.

    Rules, in order (the first that applies decides):

    1. the answer abstains ("I don't know", "not mentioned", empty) -> 0;
    2. the reference's key facts (numbers, named entities, content words; see
       :func:`ragmeter.core.text.key_facts`), minus what the question already says, are
       looked up in the answer. A missing number or named entity -> 0 (a wrong name or figure is
       the typical high-similarity wrong answer); fact coverage below ``min_coverage`` -> 0;
    3. one side negates a statement and the other does not ("Paris is not the capital"), or one
       says "yes" and the other "no" (:func:`ragmeter.core.text.negation_mismatch`) -> 0;
    4. the reference says nothing beyond the question and both texts open with yes/no: 1 when
       they agree;
    5. facts were found: 1 when ``similarity >= min_similarity`` (the answer is on topic), or when
       every fact is present and one of them is a number or a name (exact evidence: a short
       reference such as "Paris" or "72 hours." embeds poorly against a full sentence);
    6. the reference has no key fact: the plain threshold, ``similarity >= fallback_threshold``.

    Returns:
        ``(value, details)``; details hold the similarity, facts found / missing, coverage and the
        rule that decided.
    """
    details: dict[str, Any] = {"similarity": round(float(similarity), 4)}
    if is_abstention(answer, language):
        return 0.0, {**details, "rule": "abstention"}
    q_keys = fact_keys(question, language) if question else set()
    facts = key_facts(reference, exclude=q_keys, language=language)
    a_keys = fact_keys(answer, language)
    if facts:
        present = [f for f in facts if fact_present(f, a_keys, fuzzy=params.fuzzy)]
        missing = [f for f in facts if f not in present]
        coverage = len(present) / len(facts)
        details.update(facts=[f.surface for f in facts], missing=[f.surface for f in missing],
                       coverage=round(coverage, 4))
        critical = [f.surface for f in missing if f.kind in ("number", "entity")]
        if critical:
            return 0.0, {**details, "rule": "missing number or name: " + ", ".join(critical)}
        if coverage < params.min_coverage:
            return 0.0, {**details, "rule": f"fact coverage < {params.min_coverage}"}
    if params.check_negation and negation_mismatch(answer, reference, language):
        return 0.0, {**details, "rule": "negation mismatch"}
    polarity = yes_no(reference, language), yes_no(answer, language)
    if not facts and polarity[0] and polarity[1]:
        # a yes/no question whose reference adds nothing beyond the question: the polarity decides
        ok = polarity[0] == polarity[1]
        return float(ok), {**details, "rule": f"yes/no: reference {polarity[0]}, answer {polarity[1]}"}
    if facts:
        if similarity >= params.min_similarity:
            return 1.0, {**details, "rule": f"facts present, similarity >= {params.min_similarity}"}
        exact = not missing and any(f.kind in ("number", "entity") for f in facts)
        return float(exact), {**details, "rule": "every fact present incl. a number or name" if exact
                              else f"similarity < {params.min_similarity}"}
    ok = similarity >= params.fallback_threshold
    return float(ok), {**details, "rule": f"no key facts: similarity {'>=' if ok else '<'} "
                                          f"{params.fallback_threshold}"}


def guarded_best(answer: str, references: Sequence[str], sims: np.ndarray, *,
                 question: str | None, params: GuardParams, language: str = "en") -> tuple[float, dict[str, Any]]:
    """Guarded verdict against several references: correct if it is correct against any; the
    details are those of the deciding reference (the passing one, else the most similar)."""
    verdicts = [guarded_decision(answer, r, float(s), question=question, params=params, language=language)
                for r, s in zip(references, sims, strict=True)]
    passing = [i for i, (v, _) in enumerate(verdicts) if v >= 1.0]
    i = passing[0] if passing else int(np.argmax(sims))
    value, det = verdicts[i]
    if len(references) > 1:
        det = {**det, "reference": i}
    return value, det


def semantic_guarded(answer: str, reference: str | Sequence[str], *, question: str | None = None,
                     min_similarity: float = 0.5, fallback_threshold: float = DEFAULT_THRESHOLD,
                     min_coverage: float = 0.5, check_negation: bool = True,
                     model: str | None = None, encode: Encode | None = None, language: str = "en") -> float:
    """ragmeter's offline fix of the plain threshold: semantic similarity *and* the reference's
    key facts (numbers, names, content words) present in the answer, with a negation check.

    Returns 1.0 or 0.0; see :func:`guarded_decision` for the rules.

    Example:
        >>> semantic_guarded("The capital of France is London", "The capital of France is Paris")  # doctest: +SKIP
        0.0
        >>> semantic_guarded("Paris is the capital of France.", "Paris")  # doctest: +SKIP
        1.0
    """
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise MetricError("semantic correctness needs at least one reference")
    sims = reference_similarities([answer], [refs], encode or default_encode(model))[0]
    params = GuardParams(min_similarity, fallback_threshold, min_coverage, check_negation)
    return guarded_best(answer, refs, sims, question=question, params=params, language=language)[0]
