"""Claim-level agreement of an answer with its reference, offline: both texts split into claims
(sentences, and the clauses of a sentence joined by ";"), each claim matched to its most similar
claim on the other side, and the shares that find a match reported as claim recall (reference
claims the answer covers), claim precision (answer claims the reference supports) and their F1.
What an LLM claim checker does (RAGChecker, ragas' factual correctness), with an embedding
similarity and word overlap in place of the LLM's entailment verdict.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ragmeter.core import language
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample, Score
from ragmeter.embed.models import EmbeddingError, ModelUnavailableError
from ragmeter.metrics.registry import MetricSpec, register_metric

#: a claim counts as matched when its best similarity reaches this (see docs/metrics/claims.md)
DEFAULT_THRESHOLD = 0.5
#: the weight of word overlap in the similarity of two claims (the rest is the embedding cosine)
DEFAULT_LEXICAL_WEIGHT = 0.0
#: characters of a claim kept in a sample's details
SHOWN = 160

#: abbreviations that end in a period without ending a sentence (lower case, without the period)
ABBREVIATIONS: dict[str, frozenset[str]] = {
    "en": frozenset("mr mrs ms dr prof sr jr st vs etc e.g i.e eg ie inc ltd co corp no nos fig figs approx "
                    "dept est vol vols ch p pp cf al jan feb mar apr jun jul aug sep sept oct nov dec mt ft "
                    "gen col capt lt sgt rev gov sen rep u.s u.k a.m p.m".split()),
    "pt": frozenset("sr sra srs sras srta dr dra drs dras prof profa profs eng arq av r pç etc ex p.ex pág págs "
                    "p pp n nº n.º núm vol vols cap caps fig figs tel cia ltda obs séc aprox jan fev mar abr "
                    "mai jun jul ago set out nov dez a.c d.c s.a sto sta".split()),
}
_BOUNDARY = re.compile(r"([.!?…]+)([\"'”’»)\]]*)\s+(?=[\"'“‘«(\[¿¡]?[A-ZÀ-ÖØ-Þ0-9])")
_BULLET = re.compile(r"^\s*(?:[-*•–]|\d{1,3}[.)])\s+")


def split_claims(text: str, lang: str = "en") -> list[str]:
    """The claims of ``text``: its sentences, each split again at ``;``.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (with any closing quote or bracket) followed by
    white space and a capital letter or digit, except after an abbreviation of the language
    (:data:`ABBREVIATIONS`: English and Portuguese; other languages use the English list) or a
    single letter (an initial: "J. R. R. Tolkien"). Line breaks end a claim; list bullets are
    dropped. Claims without a letter or digit are left out.

    Example:
        >>> split_claims("Dr. Silva arrived at 9 a.m. He left; nobody saw him. Done!")
        ['Dr. Silva arrived at 9 a.m. He left', 'nobody saw him.', 'Done!']
    """
    abbrev = ABBREVIATIONS.get(language.normalize_code(lang), ABBREVIATIONS["en"])
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        start = 0
        for m in _BOUNDARY.finditer(line):
            before = line[start:m.start(1)].rsplit(None, 1)
            last = before[-1].lower().lstrip("(\"'“‘") if before else ""
            if m.group(1) == "." and (last in abbrev or (len(last) == 1 and last.isalpha())):
                continue
            out.append(line[start:m.end(2)].strip())
            start = m.end()
        out.append(line[start:].strip())
    claims = [c.strip() for s in out for c in s.split(";")]
    return [c for c in claims if any(ch.isalnum() for ch in c)]


def word_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """F1 of the shared words of two claims (multisets), 0 when either has none."""
    if not a or not b:
        return 0.0
    shared = sum((Counter(a) & Counter(b)).values())
    return 2 * shared / (len(a) + len(b))


def similarity_matrix(a_rows: np.ndarray, b_rows: np.ndarray, a_words: Sequence[Sequence[str]],
                      b_words: Sequence[Sequence[str]], lexical_weight: float) -> np.ndarray:
    """``(1 - w) max(0, cos) + w * word overlap`` of every claim of ``a`` with every claim of ``b``."""
    cos = np.clip(a_rows.astype(np.float64) @ b_rows.astype(np.float64).T, 0.0, 1.0)
    if lexical_weight <= 0:
        return cos
    lex = np.array([[word_overlap(x, y) for y in b_words] for x in a_words], dtype=np.float64).reshape(cos.shape)
    return (1 - lexical_weight) * cos + lexical_weight * lex


def align(answer_claims: Sequence[str], reference_claims: Sequence[str], sim: np.ndarray,
          threshold: float) -> dict[str, Any]:
    """Claim recall, precision, F1 (and their soft forms: the mean best similarity) from the
    similarity matrix ``sim`` (answer claims x reference claims), with each claim's best match."""
    n_a, n_r = len(answer_claims), len(reference_claims)
    if n_a == 0 or n_r == 0:
        return {"recall": 0.0, "precision": 0.0, "f1": 0.0, "soft_recall": 0.0, "soft_precision": 0.0,
                "reference_claims": [_shown(c, None, 0.0, threshold) for c in reference_claims],
                "answer_claims": [_shown(c, None, 0.0, threshold) for c in answer_claims]}
    best_r, arg_r = sim.max(axis=0), sim.argmax(axis=0)
    best_a, arg_a = sim.max(axis=1), sim.argmax(axis=1)
    recall = float((best_r >= threshold).mean())
    precision = float((best_a >= threshold).mean())
    f1 = 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0
    return {"recall": recall, "precision": precision, "f1": f1,
            "soft_recall": float(best_r.mean()), "soft_precision": float(best_a.mean()),
            "reference_claims": [_shown(c, answer_claims[int(arg_r[j])], float(best_r[j]), threshold)
                                 for j, c in enumerate(reference_claims)],
            "answer_claims": [_shown(c, reference_claims[int(arg_a[i])], float(best_a[i]), threshold)
                              for i, c in enumerate(answer_claims)]}


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


def _shown(claim: str, match: str | None, s: float, threshold: float) -> dict[str, Any]:
    return {"claim": _cut(claim), "best_match": _cut(match) if match is not None else None,
            "similarity": round(s, 4), "matched": bool(match is not None and s >= threshold)}


def _check_params(threshold: Any, lexical_weight: Any) -> None:
    for name, v in (("threshold", threshold), ("lexical_weight", lexical_weight)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= float(v) <= 1:
            raise ConfigError(f"{name} must be a number between 0 and 1, got {v!r}")


def claim_rows(samples: Sequence[Sample], ctx: Any, *, model: str | None = None,
               threshold: float = DEFAULT_THRESHOLD, lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> list[dict[str, Any]]:
    """Per sample, :func:`align` of its answer with the reference whose claim F1 is highest
    (``best_reference`` its index).

    Raises:
        ModelUnavailableError, EmbeddingError: the embedding model cannot be used.
    """
    _check_params(threshold, lexical_weight)
    svc = ctx.service("embeddings")
    langs = language.of_many(samples, ctx.options)
    out = []
    for s, lang in zip(samples, langs, strict=True):
        a_claims = split_claims(s.answer or "", lang)
        a_rows = svc.matrix(a_claims, model)
        a_words = [language.words(c) for c in a_claims]
        best: dict[str, Any] | None = None
        for k, ref in enumerate(s.references):
            r_claims = split_claims(ref, lang)
            sim = similarity_matrix(a_rows, svc.matrix(r_claims, model), a_words,
                                    [language.words(c) for c in r_claims], float(lexical_weight))
            row = align(a_claims, r_claims, sim, float(threshold))
            if best is None or row["f1"] > best["f1"]:
                best = {**row, "best_reference": k}
        assert best is not None
        out.append(best)
    return out


def prepare_claims(samples: Sequence[Sample], ctx: Any, model: str | None = None, **_: Any) -> None:
    """Ask the embeddings service for every claim of the run's answers and references."""
    langs = language.of_many(samples, ctx.options)
    texts: list[str] = []
    for s, lang in zip(samples, langs, strict=True):
        for t in (s.answer or "", *s.references):
            texts.extend(split_claims(t, lang))
    ctx.service("embeddings").request(texts, model)


def _score(samples: Sequence[Sample], ctx: Any, part: str, model: str | None = None,
           threshold: float = DEFAULT_THRESHOLD, lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> list[Score]:
    try:
        rows = claim_rows(samples, ctx, model=model, threshold=threshold, lexical_weight=lexical_weight)
    except (ModelUnavailableError, EmbeddingError) as exc:
        return [Score.missing(f"unavailable: {exc}")] * len(samples)
    out = []
    for s, row in zip(samples, rows, strict=True):
        details = {k: row[k] for k in ("recall", "precision", "f1", "soft_recall", "soft_precision",
                                       "reference_claims", "answer_claims") if k != part}
        if len(s.references) > 1:
            details["best_reference"] = row["best_reference"]
        out.append(Score(row[part], None, details))
    return out


def _check(ctx: Any, model: str | None = None, threshold: Any = DEFAULT_THRESHOLD,
           lexical_weight: Any = DEFAULT_LEXICAL_WEIGHT) -> str | None:
    try:
        _check_params(threshold, lexical_weight)
    except ConfigError as exc:
        return str(exc)
    return None


_DOC: Mapping[str, str] = {
    "recall": "Claim recall: the share of the reference's claims whose best-matching answer claim reaches the "
              "threshold (reference claims the answer covers).",
    "precision": "Claim precision: the share of the answer's claims whose best-matching reference claim reaches "
                 "the threshold (answer claims the reference supports).",
    "f1": "Claim F1 = 2PR / (P + R) of claim precision and claim recall.",
}
_HOW = (" Claims are the sentences of each text, split again at ';' (split_claims: English and Portuguese "
        "abbreviations). The similarity of two claims is (1 - w) max(0, cos) + w F1(shared words), cos of the "
        "bundled all-MiniLM-L6-v2 sentence embeddings, w = lexical_weight (default 0: the cosine alone); matched at "
        "similarity >= threshold (default 0.5). Several references: the one with the best claim F1. Each claim's "
        "best match and similarity are kept in the details. Offline form of RAGChecker's claim recall / "
        "precision (Ru et al. 2024) and ragas' factual correctness, without an LLM.")

for _part in ("recall", "precision", "f1"):
    register_metric(MetricSpec(
        name=f"claim_{_part}", family="semantic", fn=partial(_score, part=_part),
        requires=("answer", "reference"), range=(0.0, 1.0), needs_embeddings=True,
        defaults={"model": None, "threshold": DEFAULT_THRESHOLD, "lexical_weight": DEFAULT_LEXICAL_WEIGHT},
        param="threshold", prepare=prepare_claims, check=_check,
        description=_DOC[_part] + _HOW + "\n\n" + (split_claims.__doc__ or "")))
