"""Retrievers of the bundled pipeline: BM25 (``bm25s``), dense embeddings (``ragmeter.embed``)
and their reciprocal-rank fusion (``hybrid``). Each ranks chunks for a batch of queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ragmeter.core.errors import ConfigError
from ragmeter.core.text import STOPWORDS, stem, tokens
from ragmeter.pipeline.chunking import TextChunk

RETRIEVERS = ("bm25", "embedding", "hybrid")
#: reciprocal-rank-fusion constant (Cormack et al. 2009)
RRF_K = 60


def analyse(text: str, language: str = "en") -> list[str]:
    """Index terms: normalised tokens without stopwords, stemmed (numbers kept).

    English: ragmeter's English stopwords and the Porter stemmer. Other languages: the stopword list
    bm25s ships for the language (Portuguese, Spanish, French, German ...; none when it ships none)
    and the language's Snowball stemmer (:mod:`ragmeter.core.language`)."""
    if language == "en":
        return [t if t[:1].isdigit() else stem(t) for t in tokens(text) if t not in STOPWORDS]
    stop = _folded_stopwords(language)
    return [t if t[:1].isdigit() else stem(t, language) for t in tokens(text) if t not in stop]


def _folded_stopwords(language: str) -> frozenset[str]:
    import ragmeter.core.language as lang

    return frozenset(lang.fold(w) for w in lang.stopwords(language))


class Retriever(Protocol):
    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """``(n_queries, n_chunks)`` relevance scores (higher is better)."""


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the ``k`` best chunks per row; ties go to the earlier chunk."""
    k = min(k, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


class BM25Retriever:
    """Okapi BM25 (``bm25s``, Lucene variant, k1=1.5, b=0.75) over stemmed, stopword-free terms:

    .. math:: s(q, d) = \\sum_{t \\in q} \\ln\\Big(1 + \frac{N - df_t + 0.5}{df_t + 0.5}\\Big)
              \frac{tf_{t,d}}{tf_{t,d} + k_1 (1 - b + b\\, |d| / \\overline{|d|})}
    """

    def __init__(self, chunks: Sequence[TextChunk], *, k1: float = 1.5, b: float = 0.75,
                 language: str = "en") -> None:
        import bm25s

        self.language = language
        self.n = len(chunks)
        self.model = bm25s.BM25(k1=k1, b=b)
        # an empty chunk vocabulary would make bm25s fail: a placeholder term keeps it indexable
        self.model.index([analyse(c.text, language) or ["\x00"] for c in chunks], show_progress=False)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(queries), self.n), dtype=np.float64)
        for i, q in enumerate(queries):
            terms = analyse(q, self.language)
            if terms:
                out[i] = self.model.get_scores(terms)
        return out


_CHUNK_MATRICES: dict[tuple[str | None, str], np.ndarray] = {}


class EmbeddingRetriever:
    """Cosine similarity of query and chunk embeddings (all-MiniLM-L6-v2 by default). The chunk
    matrix of a given chunking is computed once per process (BM25+embedding ``hybrid`` reuses it)."""

    def __init__(self, chunks: Sequence[TextChunk], *, model: str | None = None) -> None:
        import hashlib

        from ragmeter.embed import get_encoder

        self.encoder = get_encoder(model)
        digest = hashlib.sha256("\x1e".join(c.text for c in chunks).encode("utf-8")).hexdigest()
        key = (model, digest)
        if key not in _CHUNK_MATRICES:
            if len(_CHUNK_MATRICES) >= 16:
                _CHUNK_MATRICES.pop(next(iter(_CHUNK_MATRICES)))
            _CHUNK_MATRICES[key] = np.asarray(self.encoder.encode([c.text for c in chunks]), dtype=np.float32)
        self.matrix = _CHUNK_MATRICES[key]

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        if not queries:
            return np.zeros((0, self.matrix.shape[0]))
        q = np.asarray(self.encoder.encode(list(queries)), dtype=np.float32)
        return (q @ self.matrix.T).astype(np.float64)


class HybridRetriever:
    """Reciprocal rank fusion of BM25 and embeddings: ``sum_r 1 / (60 + rank_r(chunk))``."""

    def __init__(self, chunks: Sequence[TextChunk], *, model: str | None = None, language: str = "en") -> None:
        self.parts: list[Retriever] = [BM25Retriever(chunks, language=language),
                                       EmbeddingRetriever(chunks, model=model)]

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        total: np.ndarray | None = None
        for part in self.parts:
            s = part.scores(queries)
            ranks = np.empty_like(s)
            order = np.argsort(-s, axis=1, kind="stable")
            np.put_along_axis(ranks, order, np.arange(1, s.shape[1] + 1, dtype=np.float64)[None, :]
                              .repeat(s.shape[0], axis=0), axis=1)
            rrf = 1.0 / (RRF_K + ranks)
            total = rrf if total is None else total + rrf
        assert total is not None
        return total


def make_retriever(kind: str, chunks: Sequence[TextChunk], *, model: str | None = None,
                   language: str = "en") -> Retriever:
    if not chunks:
        raise ConfigError("the corpus produced no chunk to retrieve from")
    if kind == "bm25":
        return BM25Retriever(chunks, language=language)
    if kind == "embedding":
        return EmbeddingRetriever(chunks, model=model)
    if kind == "hybrid":
        return HybridRetriever(chunks, model=model, language=language)
    raise ConfigError(f"unknown retriever {kind!r}; choose one of {', '.join(RETRIEVERS)}")
