"""Deciding which retrieved chunks are relevant: by id, by exact text, by span overlap or by
embedding similarity, and turning the decisions of a batch of samples into one relevance matrix.

Whatever the rule, matching yields a boolean matrix (retrieved x relevant); each relevant chunk is
then credited at the first rank where a retrieved chunk matches it. A retrieved chunk that only
matches relevant chunks already found higher up (an exact duplicate, a near-duplicate under the
similarity rule, a second piece of an already covered span) adds nothing: duplicates count once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.metrics.retrieval.relevance import RelevanceMatrix

RULES = ("auto", "exact_id", "exact_text", "span", "similarity")
Span = tuple[str, int, int]


def check_rule(match: str, span_threshold: float = 0.5, similarity_threshold: float = 0.8) -> None:
    """Raise :class:`MetricError` for an unknown rule or a threshold out of range."""
    if match not in RULES:
        raise MetricError(f"match must be one of {', '.join(RULES)}, got {match!r}")
    if not 0.0 < span_threshold <= 1.0:
        raise MetricError(f"span_threshold must be in (0, 1], got {span_threshold!r}")
    if not -1.0 <= similarity_threshold <= 1.0:
        raise MetricError(f"similarity_threshold must be in [-1, 1], got {similarity_threshold!r}")


def grade_of(chunk: Chunk) -> float:
    """A relevant chunk's grade: its ``grade``, 1 when not given."""
    return 1.0 if chunk.grade is None else float(chunk.grade)


def first_ranks_exact(retrieved: Sequence[Hashable], relevant: Mapping[Hashable, float]) -> list[tuple[int | None, float]]:
    """For every relevant key with a positive grade: (1-based rank of its first retrieval or None, grade)."""
    first: dict[Hashable, int] = {}
    for i, key in enumerate(retrieved, start=1):
        if key in relevant and key not in first:
            first[key] = i
    return [(first.get(key), float(g)) for key, g in relevant.items() if g > 0]


def first_ranks_matrix(matches: np.ndarray, grades: Sequence[float]) -> list[tuple[int | None, float]]:
    """Same from a boolean (retrieved x relevant) match matrix; relevant chunks with grade <= 0 are
    dropped."""
    matches = np.asarray(matches, dtype=bool)
    out: list[tuple[int | None, float]] = []
    any_hit = matches.any(axis=0) if matches.size else np.zeros(len(grades), dtype=bool)
    first = matches.argmax(axis=0) if matches.size else np.zeros(len(grades), dtype=np.int64)
    for j, g in enumerate(grades):
        if g > 0:
            out.append((int(first[j]) + 1 if any_hit[j] else None, float(g)))
    return out


def overlap_matrix(retrieved: Sequence[Span], relevant: Sequence[Span], threshold: float) -> np.ndarray:
    """``M[i, j]``: retrieved span i covers at least ``threshold`` of relevant span j (same source).

    A zero-length relevant span is covered by a retrieved span that contains its position.
    """
    out = np.zeros((len(retrieved), len(relevant)), dtype=bool)
    for j, (src, gs, ge) in enumerate(relevant):
        glen = ge - gs
        for i, (rsrc, rs, re_) in enumerate(retrieved):
            if rsrc != src:
                continue
            if glen <= 0:
                out[i, j] = rs <= gs < re_
            else:
                ov = min(re_, ge) - max(rs, gs)
                out[i, j] = ov > 0 and ov / glen >= threshold
    return out


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarities of the rows of ``a`` and ``b`` (a zero row has similarity 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[None, :]
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    if a.shape[1] != b.shape[1]:
        raise MetricError(f"embeddings have different sizes: {a.shape[1]} and {b.shape[1]}")
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nb = np.linalg.norm(b, axis=1, keepdims=True)
    return (a / np.where(na > 0, na, 1.0)) @ (b / np.where(nb > 0, nb, 1.0)).T


def span_of(c: Chunk) -> Span:
    return (str(c.source), int(c.start or 0), int(c.end or 0))


def auto_rule(contexts: Sequence[Chunk], relevant: Sequence[Chunk]) -> str | None:
    """ids when every chunk has one, else spans when every chunk has one, else exact text."""
    both = list(contexts) + list(relevant)
    if all(c.id is not None for c in both):
        return "exact_id"
    if all(c.has_span for c in both):
        return "span"
    if all(c.text is not None for c in both):
        return "exact_text"
    return None


def _lacking(rule: str, contexts: Sequence[Chunk], relevant: Sequence[Chunk]) -> str | None:
    both = list(contexts) + list(relevant)
    if rule == "exact_id" and any(c.id is None for c in both):
        return "cannot match by id: a chunk has no id"
    if rule == "span" and any(not c.has_span for c in both):
        return "cannot match by span: a chunk has no source/start/end"
    if rule in ("exact_text", "similarity") and any(c.text is None for c in both):
        return f"cannot match by {'text' if rule == 'exact_text' else 'similarity'}: a chunk has no text"
    return None


@dataclass
class BatchMatch:
    """The relevance matrix of a batch of samples plus, per sample, why it could not be matched."""

    matrix: RelevanceMatrix
    reasons: list[str | None]
    rules: list[str | None]


def match_samples(samples: Sequence[Sample], match: str = "auto", *, span_threshold: float = 0.5,
                  similarity_threshold: float = 0.8,
                  embed: Callable[[list[str]], np.ndarray] | None = None) -> BatchMatch:
    """Match every sample's ``contexts`` against its ``relevant`` chunks with one rule.

    Args:
        samples: samples with ``contexts`` and ``relevant`` (``None`` is treated as empty).
        match: ``auto``, ``exact_id``, ``exact_text``, ``span`` or ``similarity``.
        span_threshold: fraction of a relevant span a retrieved span must cover.
        similarity_threshold: cosine at or above which two chunks match.
        embed: ``embed(texts) -> (n, d)`` rows for the similarity rule (L2-normalised or not).

    Returns:
        A :class:`BatchMatch`; samples that cannot be matched (e.g. a chunk without an id under
        ``exact_id``) have a reason and an empty row.
    """
    check_rule(match, span_threshold, similarity_threshold)
    n_ret: list[int] = []
    items: list[list[tuple[int | None, float]]] = []
    reasons: list[str | None] = []
    rules: list[str | None] = []
    sim_rows: list[int] = []
    for s in samples:
        ctx = list(s.contexts or [])
        rel = list(s.relevant or [])
        rule = auto_rule(ctx, rel) if match == "auto" else match
        reason = None
        if rule is None:
            reason = "cannot match chunks: give ids, spans (source/start/end) or texts on both sides"
        else:
            reason = _lacking(rule, ctx, rel)
        rules.append(rule)
        reasons.append(reason)
        n_ret.append(len(ctx) if reason is None else 0)
        if reason is not None:
            items.append([])
            continue
        if rule == "exact_id":
            items.append(first_ranks_exact([c.id for c in ctx], _best_grades((c.id, grade_of(c)) for c in rel)))
        elif rule == "exact_text":
            items.append(first_ranks_exact([c.text for c in ctx], _best_grades((c.text, grade_of(c)) for c in rel)))
        elif rule == "span":
            m = overlap_matrix([span_of(c) for c in ctx], [span_of(c) for c in rel], span_threshold)
            items.append(first_ranks_matrix(m, [grade_of(c) for c in rel]))
        else:
            items.append([])
            sim_rows.append(len(items) - 1)
    if sim_rows:
        if embed is None:
            raise MetricError("the similarity rule needs embeddings (an embed function)")
        texts = sorted({c.text for i in sim_rows for c in (samples[i].contexts or []) + (samples[i].relevant or [])
                        if c.text is not None})
        rows = np.asarray(embed(texts), dtype=np.float64) if texts else np.zeros((0, 1))
        where = {t: i for i, t in enumerate(texts)}
        for i in sim_rows:
            ctx = list(samples[i].contexts or [])
            rel = list(samples[i].relevant or [])
            a = rows[[where[c.text] for c in ctx]] if ctx else np.zeros((0, rows.shape[1]))
            b = rows[[where[c.text] for c in rel]] if rel else np.zeros((0, rows.shape[1]))
            items[i] = first_ranks_matrix(cosine_matrix(a, b) >= similarity_threshold,
                                          [grade_of(c) for c in rel])
    multi = match in ("span", "similarity") or any(r in ("span", "similarity") for r in rules)
    m = RelevanceMatrix.from_first_ranks(n_ret, items, [s.id for s in samples], multi_match=multi)
    return BatchMatch(m, reasons, rules)


def _best_grades(pairs: Any) -> dict[Hashable, float]:
    out: dict[Hashable, float] = {}
    for key, g in pairs:
        out[key] = max(g, out.get(key, g))
    return out


# ------------------------------------------------------------------ character-level span overlap
def _union(spans: Sequence[Span]) -> dict[str, list[tuple[int, int]]]:
    by_src: dict[str, list[tuple[int, int]]] = {}
    for src, s, e in spans:
        if e > s:
            by_src.setdefault(src, []).append((s, e))
    out: dict[str, list[tuple[int, int]]] = {}
    for src, iv in by_src.items():
        iv.sort()
        merged = [list(iv[0])]
        for s, e in iv[1:]:
            if s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out[src] = [(a, b) for a, b in merged]
    return out


def _length(u: dict[str, list[tuple[int, int]]]) -> int:
    return sum(e - s for iv in u.values() for s, e in iv)


def _intersection(a: dict[str, list[tuple[int, int]]], b: dict[str, list[tuple[int, int]]]) -> int:
    total = 0
    for src, ia in a.items():
        ib = b.get(src, [])
        i = j = 0
        while i < len(ia) and j < len(ib):
            lo = max(ia[i][0], ib[j][0])
            hi = min(ia[i][1], ib[j][1])
            if hi > lo:
                total += hi - lo
            if ia[i][1] < ib[j][1]:
                i += 1
            else:
                j += 1
    return total


def span_overlap(retrieved: Sequence[Span], relevant: Sequence[Span]) -> tuple[int, int, int]:
    """Characters (retrieved, relevant, both), each span set merged per source so overlapping
    spans count their characters once."""
    ur, ug = _union(retrieved), _union(relevant)
    return _length(ur), _length(ug), _intersection(ur, ug)
