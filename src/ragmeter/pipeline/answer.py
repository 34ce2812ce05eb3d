"""Extractive answering: the answer is the retrieved sentence that best covers the question (no LLM)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragmeter.core.errors import ConfigError
from ragmeter.pipeline.retriever import analyse

ANSWERERS = ("overlap", "embedding")
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")


@dataclass(frozen=True)
class Sentence:
    text: str
    chunk_rank: int
    position: int


def sentences(chunk_texts: Sequence[str]) -> list[Sentence]:
    """Sentences of the retrieved chunks, in retrieval order; markdown headings are dropped and
    list/quote markers stripped; fragments with fewer than three words are skipped."""
    out: list[Sentence] = []
    for rank, text in enumerate(chunk_texts):
        for pos, raw in enumerate(_SPLIT.split(text)):
            if raw.lstrip().startswith("#"):
                continue
            s = _MARKUP.sub("", raw).strip()
            if len(s.split()) >= 3:
                out.append(Sentence(s, rank, pos))
    return out


def idf_table(chunk_terms: Sequence[Sequence[str]]) -> dict[str, float]:
    """BM25's idf per term over the chunk collection: ``log(1 + (N - df + 0.5) / (df + 0.5))``."""
    n = len(chunk_terms)
    df: dict[str, int] = {}
    for terms in chunk_terms:
        for t in set(terms):
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


def overlap_scores(question: str, cands: Sequence[Sentence], idf: dict[str, float],
                   language: str = "en") -> np.ndarray:
    """idf-weighted share of the question's terms found in each sentence, minus 0.01 per
    retrieval rank (earlier chunks win ties)."""
    q = set(analyse(question, language))
    default = max(idf.values(), default=1.0)
    total = sum(idf.get(t, default) for t in q) or 1.0
    out = np.empty(len(cands))
    for i, c in enumerate(cands):
        terms = set(analyse(c.text, language))
        out[i] = sum(idf.get(t, default) for t in q & terms) / total - 0.01 * c.chunk_rank
    return out


def pick(cands: Sequence[Sentence], scores: np.ndarray, n: int) -> str:
    """The ``n`` best sentences (stable: ties keep retrieval order), joined in reading order."""
    if not cands:
        return ""
    best = sorted(np.argsort(-scores, kind="stable")[:n].tolist(),
                  key=lambda i: (cands[i].chunk_rank, cands[i].position))
    return " ".join(cands[i].text for i in best)


def answer_batch(questions: Sequence[str], contexts: Sequence[Sequence[str]], *, method: str,
                 n_sentences: int, idf: dict[str, float],
                 encode: Callable[[list[str]], np.ndarray] | None = None, language: str = "en") -> list[str]:
    """One extractive answer per question from its retrieved chunk texts ("" when nothing fits)."""
    if method not in ANSWERERS:
        raise ConfigError(f"unknown answerer {method!r}; choose one of {', '.join(ANSWERERS)}")
    cands = [sentences(c) for c in contexts]
    if method == "overlap":
        return [pick(c, overlap_scores(q, c, idf, language), n_sentences)
                for q, c in zip(questions, cands, strict=True)]
    assert encode is not None
    texts = list(dict.fromkeys([*questions, *(s.text for c in cands for s in c)]))
    mat = np.asarray(encode(texts), dtype=np.float32) if texts else np.zeros((0, 1), np.float32)
    row = {t: i for i, t in enumerate(texts)}
    out = []
    for q, c in zip(questions, cands, strict=True):
        if not c:
            out.append("")
            continue
        sims = np.array([float(mat[row[q]] @ mat[row[s.text]]) for s in c]) - 0.001 * np.array(
            [s.chunk_rank for s in c])
        out.append(pick(c, sims, n_sentences))
    return out
